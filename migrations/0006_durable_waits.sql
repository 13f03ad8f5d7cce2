-- Why: runs can now wait without a process holding them: a `.sleep` until a
-- time, a `.waitFor` until a signal (or its timeout), or an enqueued run until
-- a worker starts it. A suspended run is one row with its wake-up time; no
-- timer, connection or lease holds it. Workers find due runs through a partial
-- index on the wake-up time, compared with now() (stable within a statement,
-- so it is an index condition; see 0004). Signals are kept in their own table,
-- keyed by tenant first like every other key, so that one delivered before the
-- run reaches its wait is not lost and a provider's retried webhook counts once.

-- When a suspended run becomes due (DB clock); NULL while it waits for a signal without timeout.
ALTER TABLE runs ADD COLUMN wake_at timestamptz;
-- What it waits for: the kind and name of the `.sleep` or `.waitFor` item.
ALTER TABLE runs ADD COLUMN wait_kind text CHECK (wait_kind IN ('sleep', 'signal'));
ALTER TABLE runs ADD COLUMN wait_name text;
-- True once the run was enqueued or suspended: its completion is announced
-- with NOTIFY for `engine.wait`. Plain request runs never pay for a NOTIFY.
ALTER TABLE runs ADD COLUMN durable boolean NOT NULL DEFAULT false;

-- A run's history also shows its sleeps and waits.
ALTER TABLE run_history DROP CONSTRAINT run_history_kind_check;
ALTER TABLE run_history ADD CONSTRAINT run_history_kind_check CHECK (kind IN ('phase', 'step', 'sleep', 'wait'));

CREATE TABLE signals (
  tenant_id    text        NOT NULL,
  key          text        NOT NULL,
  -- A signal belongs to one run of the key; a key reused after retention starts without them.
  run_id       text        NOT NULL,
  -- The `.waitFor` item it is for.
  name         text        NOT NULL,
  -- json, not jsonb: merged into state as it was sent.
  payload      json        NOT NULL,
  -- SHA-256 hex of the name and the RFC 8785 canonical payload: "the same signal".
  -- 'timed_out' (payload null) marks a wait that went on without its signal:
  -- a signal that comes later is refused.
  fingerprint  text        NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, key, run_id, name)
);

-- Workers: suspended runs by wake-up time (due ones first, and the next one to come).
CREATE INDEX IF NOT EXISTS runs_suspended_wake_at ON runs (wake_at) WHERE status = 'suspended';
