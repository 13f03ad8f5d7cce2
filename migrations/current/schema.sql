-- idempo's schema as it is now, after every numbered migration in the folder
-- above: each table, index and function, written out in full, grouped by
-- what it is for. Read this file to see the schema; change it only together
-- with a new migration. packages/core/test/schema-drift.test.ts builds one
-- database from the migrations and one from this file and fails when the
-- two differ (a column, a constraint, an index, a function's definition).
--
-- Not a migration: engine.migrate() applies only the numbered files and
-- never reads this folder, and the package does not ship it. A database
-- built from this file records no applied versions, so install and upgrade
-- through engine.migrate() (or apply the numbered files in order).
--
-- Like the migrations, it names no schema: apply it with search_path set to
-- the engine's configured schema (createEngine's `schema`, "idempo" by
-- default), as the runner does. The runner also creates the table
-- schema_migrations (version, name, applied_at) it records versions in;
-- that table is the runner's own and is not repeated here.
-- Each function ends with `$$;` on its own line, as in the migrations.


-- ===========================================================================
-- The key record and its history (0001; columns added by 0003, 0005-0007,
-- 0010-0013, 0018, 0019, in the order the migrations added them)
-- ===========================================================================

-- One row per tenant and idempotency key. Every table and index leads with
-- tenant_id so the schema can be distributed by tenant (Citus) without change.
CREATE TABLE runs (
  tenant_id        text        NOT NULL,
  key              text        NOT NULL,
  -- A fresh id per intent; a key reused after retention starts a new run id.
  run_id           text        NOT NULL,
  workflow         text        NOT NULL,
  -- Ordered "kind:name" list of the definition the run started under, and its hash.
  definition       json        NOT NULL,
  definition_hash  text        NOT NULL,
  -- SHA-256 hex of workflow name + RFC 8785 canonical input.
  fingerprint      text        NOT NULL,
  -- json, not jsonb: kept byte for byte as written (key order, NUL escapes).
  input            json        NOT NULL,
  -- SHA-256 hex of the input as the workflow's schema parsed it at the claim; a
  -- takeover that parses differently (a random default) refuses to resume.
  parsed_input_hash text,
  -- in_flight: an attempt owns it (or its lease ran out); completed: a
  -- response is stored; parked: the engine stopped trying; suspended: it
  -- waits for a time or a signal with no process holding it.
  status           text        NOT NULL,
  -- Minted on every claim and takeover; every write of the run is fenced on it.
  owner_token      text,
  -- The lease, always computed on the database clock.
  locked_until     timestamptz,
  attempt          integer     NOT NULL DEFAULT 1,
  recovery_point   text,
  state            json        NOT NULL DEFAULT '{}',
  retention_ms     bigint      NOT NULL,
  -- 'succeeded' (respond), 'failed' (ctx.fail), 'errored' (stored unknown
  -- error) or 'canceled' (an operator's cancel).
  outcome          text,
  response_status  integer,
  response_body    json,
  expires_at       timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  -- Why the engine stopped trying, in words an operator can act on; set only while parked.
  parked_reason    text,
  parked_at        timestamptz,
  -- The attempt number at the last unpark (0 before any): maxAttempts counts
  -- the attempts above it.
  attempt_floor    integer     NOT NULL DEFAULT 0,
  -- The W3C traceparent of the last traced attempt; the next attempt's trace links to it.
  trace_parent     text,
  -- When a suspended run becomes due (DB clock); NULL while it waits for a signal without timeout.
  wake_at          timestamptz,
  -- What it waits for: the kind and name of the `.sleep` or `.waitFor` item.
  wait_kind        text,
  wait_name        text,
  -- True once the run was enqueued or suspended: its completion is announced
  -- with NOTIFY for `engine.wait`. Plain request runs never pay for a NOTIFY.
  durable          boolean     NOT NULL DEFAULT false,
  -- The workflow version that started the run (1 for unversioned workflows).
  workflow_version integer     NOT NULL DEFAULT 1,
  -- How long the record's tombstone stays after its retention, in ms.
  tombstone_ms     bigint      NOT NULL DEFAULT 604800000,
  -- How many times retryFrom minted new delivery keys for this run (resendOutbox).
  outbox_round     integer     NOT NULL DEFAULT 0,
  -- The deadline of the `.waitFor` the run waits at (DB clock), set when it
  -- first suspends there; NULL for a wait without timeout and for a sleep.
  wait_until       timestamptz,
  -- The concurrency limit the run was last admitted under (0018): its
  -- workflow's name and the key its `.concurrency` computed, joined by
  -- U+001F, and its `max`; NULL for workflows without one.
  concurrency_key  text,
  concurrency_max  integer,
  -- The priority it was enqueued with (0018); NULL for its workflow's own `.priority`.
  priority         integer,
  CONSTRAINT runs_pkey PRIMARY KEY (tenant_id, key),
  CONSTRAINT runs_status_check CHECK (status IN ('in_flight', 'completed', 'parked', 'suspended')),
  CONSTRAINT runs_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'errored', 'canceled')),
  -- No process owns a run that is not in flight; a completed run has its response.
  CONSTRAINT runs_state_check CHECK (
    status = 'in_flight'
    OR (status IN ('parked', 'suspended') AND owner_token IS NULL)
    OR (status = 'completed' AND owner_token IS NULL AND response_status IS NOT NULL AND expires_at IS NOT NULL)
  ),
  CONSTRAINT runs_parked_reason_check CHECK (status <> 'parked' OR parked_reason IS NOT NULL),
  CONSTRAINT runs_wait_kind_check CHECK (wait_kind IN ('sleep', 'signal'))
);

-- One entry per phase, step call, sleep and wait of each attempt, and per
-- parallel item and branch call (0019).
CREATE TABLE run_history (
  tenant_id    text        NOT NULL,
  key          text        NOT NULL,
  run_id       text        NOT NULL,
  entry_id     text        NOT NULL,
  kind         text        NOT NULL,
  name         text        NOT NULL,
  attempt      integer     NOT NULL,
  derived_key  text,
  -- started: a step call may be under way or in doubt; interrupted: a later
  -- attempt found it started and took the step over; discarded: a wait threw
  -- away a stored signal that fails its schema (error says why); the rest are final.
  outcome      text        NOT NULL,
  error        text,
  started_at   timestamptz NOT NULL,
  finished_at  timestamptz,
  -- Every call of a step retried in process, as [{ error, durationMs }],
  -- oldest first; NULL for a single call, phases, sleeps and waits.
  tries        json,
  -- The branch of a 'branch' entry (its item is the entry's name); NULL for every other kind.
  branch       text,
  -- A branch's result as JSON text, from its return until its item commits or the run is rewound.
  result       json,
  CONSTRAINT run_history_pkey PRIMARY KEY (tenant_id, key, entry_id),
  CONSTRAINT run_history_kind_check
    CHECK (kind IN ('phase', 'step', 'sleep', 'wait', 'parallel', 'branch')),
  CONSTRAINT run_history_outcome_check
    CHECK (outcome IN ('started', 'interrupted', 'succeeded', 'failed', 'reconciled', 'discarded'))
);

-- Indexes of runs. Those that serve scans across tenants lead with the time
-- they compare, not tenant_id (0004): a range compared with now() is an
-- index condition, so the cost follows the rows found, not the table.
-- Operator listings, newest first.
CREATE INDEX runs_created ON runs (tenant_id, created_at);
-- Operators list parked runs (idempo keys parked) without scanning the table.
CREATE INDEX runs_parked ON runs (tenant_id, parked_at) WHERE status = 'parked';
-- engine.sweep(): completed records past retention, oldest expiry first.
CREATE INDEX runs_completed_expires_at ON runs (expires_at) WHERE status = 'completed';
-- resumeStale and `keys stuck`: in-flight runs by lease end.
CREATE INDEX runs_in_flight_locked_until ON runs (locked_until) WHERE status = 'in_flight';
-- Workers: suspended runs by wake-up time (due ones first, and the next one to come).
CREATE INDEX runs_suspended_wake_at ON runs (wake_at) WHERE status = 'suspended';
-- Workers: due runs enqueued with a priority, highest first, wherever they
-- stand in wake-up order (0018). Only those runs are in it.
CREATE INDEX runs_suspended_priority ON runs (priority DESC, wake_at)
  WHERE status = 'suspended' AND priority IS NOT NULL;


-- ===========================================================================
-- Signals (0006)
-- ===========================================================================

-- Kept in their own table, keyed by tenant first, so that one delivered
-- before the run reaches its wait is not lost and a provider's retried
-- webhook counts once.
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
  CONSTRAINT signals_pkey PRIMARY KEY (tenant_id, key, run_id, name)
);


-- ===========================================================================
-- Tombstones (0010)
-- ===========================================================================

-- What stays of a completed run once its record expired, for its
-- tombstone_ms: a request for the key is refused with 410 instead of running
-- again. One narrow row with no history. The fixed-width columns first: they
-- follow the tuple header without padding, and the variable-length ones
-- after them need no alignment.
CREATE TABLE tombstones (
  -- When the run completed and when its record expired (its expires_at).
  completed_at timestamptz NOT NULL,
  expired_at   timestamptz NOT NULL,
  -- expired_at + the run's tombstone_ms: from then on the key is absent.
  kept_until   timestamptz NOT NULL,
  tenant_id    text        NOT NULL,
  -- key_digest(key), below.
  key_digest   bytea       NOT NULL,
  workflow     text        NOT NULL,
  outcome      text        NOT NULL,
  -- SHA-256 of workflow name + RFC 8785 canonical input, raw (runs.fingerprint is its hex).
  fingerprint  bytea       NOT NULL,
  CONSTRAINT tombstones_pkey PRIMARY KEY (tenant_id, key_digest),
  CONSTRAINT tombstones_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'errored', 'canceled'))
);

-- The sweep of tombstones past their time, oldest first.
CREATE INDEX tombstones_kept_until ON tombstones (kept_until);


-- ===========================================================================
-- The outbox (0002; 0011 added run_attempt and moved it into the unique key)
-- ===========================================================================

-- Side effects that cannot take an idempotency key (email, SMS, webhooks),
-- written in the same transaction as the phase that decides them and
-- delivered at least once by a relay.
CREATE TABLE outbox (
  tenant_id     text        NOT NULL,
  message_id    text        NOT NULL,
  key           text        NOT NULL,
  run_id        text        NOT NULL,
  topic         text        NOT NULL,
  payload       json        NOT NULL,
  -- Names the logical message (tenant, key, run, phase, position, outbox
  -- round), the same on every attempt: the receiver deduplicates on it.
  delivery_key  text        NOT NULL,
  status        text        NOT NULL DEFAULT 'pending',
  -- Delivery attempts so far; also the fencing token of the relay holding the row.
  attempts      integer     NOT NULL DEFAULT 0,
  available_at  timestamptz NOT NULL DEFAULT now(),
  -- A relay's claim on the row while it delivers (DB clock).
  locked_until  timestamptz,
  last_error    text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  delivered_at  timestamptz,
  -- The run attempt whose phase enqueued the row (0 for rows written before
  -- 0011): a paused zombie's row and its successor's differ here, so neither
  -- waits on the other in the unique index.
  run_attempt   integer     NOT NULL DEFAULT 0,
  CONSTRAINT outbox_pkey PRIMARY KEY (tenant_id, message_id),
  CONSTRAINT outbox_tenant_delivery_key_attempt UNIQUE (tenant_id, delivery_key, run_attempt),
  CONSTRAINT outbox_status_check CHECK (status IN ('pending', 'delivered', 'dead'))
);

-- The relay's claim: pending messages by due time.
CREATE INDEX outbox_pending_available_at ON outbox (available_at) WHERE status = 'pending';
-- The outbox sweep: delivered messages by delivery time.
CREATE INDEX outbox_delivered_at ON outbox (delivered_at) WHERE status = 'delivered';


-- ===========================================================================
-- Schedules (0016)
-- ===========================================================================

-- One row per durable schedule (engine.schedule), named across tenants: a
-- small table of configuration (under Citus, a reference table), not of
-- per-tenant data; each tick's run carries the schedule's tenant. The row
-- keeps the first tick not yet fired; a worker locks it, starts the runs of
-- the due ticks and moves it past them in one transaction. Cron and time
-- zone are evaluated by the engine, never in SQL.
CREATE TABLE schedules (
  name text PRIMARY KEY,
  tenant_id text NOT NULL,
  workflow text NOT NULL,
  cron text NOT NULL,
  timezone text NOT NULL,
  catch_up text NOT NULL CHECK (catch_up IN ('none', 'latest', 'all')),
  -- How late a tick may be fired and still count as on time, not missed.
  grace_ms integer NOT NULL CHECK (grace_ms >= 0),
  -- The input comes from a function given to engine.schedule: only processes that registered it fire it.
  has_input boolean NOT NULL,
  paused boolean NOT NULL DEFAULT false,
  -- The first tick not yet fired (or skipped); NULL when the expression has no tick left.
  next_tick_at timestamptz,
  last_tick_at timestamptz,
  last_fired_at timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A firing round's look for due schedules, by the time it compares with now().
CREATE INDEX schedules_due ON schedules (next_tick_at) WHERE NOT paused;


-- ===========================================================================
-- Concurrency slots and rate limits (0018)
-- ===========================================================================

-- One row per slot of each concurrency key (`.concurrency({ key, max })`),
-- made on the key's first use; (tenant_id, key, owner_token) name the
-- attempt that took it last. The attempt holds it while its run is in
-- flight under that owner token and a lease that has not run out: the slot
-- is the lease, freed by completion, suspension, release, takeover or the
-- lease's end without a write. Keys span tenants (a limit may be global),
-- so the table is keyed by the limit (under Citus, a reference table).
CREATE TABLE concurrency_slots (
  limit_key   text    NOT NULL,
  slot        integer NOT NULL,
  tenant_id   text,
  key         text,
  owner_token text,
  CONSTRAINT concurrency_slots_pkey PRIMARY KEY (limit_key, slot)
);

-- One token bucket per rate limit name (createEngine's `rateLimits`),
-- shared by every process: `tokens` as of `refilled_at` (database clock),
-- below zero while tokens are reserved by callers waiting for them.
CREATE TABLE rate_limits (
  name        text             NOT NULL,
  tokens      double precision NOT NULL,
  refilled_at timestamptz      NOT NULL,
  CONSTRAINT rate_limits_pkey PRIMARY KEY (name)
);


-- ===========================================================================
-- Functions
-- ===========================================================================
-- The engine's hot-path statements live in PL/pgSQL functions (0008), so
-- every driver runs them with cached plans; the engine calls each with one
-- short SELECT (packages/core/src/store/statement-calls.ts lists them with
-- their arity). Every write keeps its fence (owner token and status) in its
-- WHERE clause. SET search_path FROM CURRENT pins the configured schema for
-- the table names in the bodies, whatever the caller's search_path is.
-- Every completion goes through mark_completed (0014), which also announces
-- a durable run's completion on the channel idempo_done with the tag
-- completion_tag(tenant_id, key), for `engine.wait` (store/notify-channels.ts
-- names both on the TypeScript side).
-- Where a migration overloaded a function with more arguments, the older
-- form stays for processes of the previous release during a rolling
-- deploy; both are written out here, the current one first.

-- ---------------------------------------------------------------------------
-- Tombstones: how a tombstone names its key (0010)
-- ---------------------------------------------------------------------------

-- The first 16 bytes of SHA-256 over the key's UTF-8. A plain SQL function,
-- inlined by the planner.
CREATE OR REPLACE FUNCTION key_digest(p_key text) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT substring(sha256(convert_to(p_key, 'UTF8')) FROM 1 FOR 16)
$$;

-- ---------------------------------------------------------------------------
-- The claim (0010; the 13-argument form of 0009 stays for rolling deploys)
-- ---------------------------------------------------------------------------

-- Read the key first and answer an existing record from that read; a key
-- absent from runs reads its tombstone; only a key found in neither goes on
-- to the INSERT ... ON CONFLICT DO NOTHING. Race: another first request may
-- commit the key between the read and the INSERT; ON CONFLICT waits for it,
-- and a second read (a new statement, so a new snapshot) answers with it; if
-- it is gone again by then, the answer is "raced" and the engine asks again.
CREATE OR REPLACE FUNCTION claim_new_key(
  p_tenant_id text, p_key text, p_run_id text, p_workflow text, p_workflow_version integer, p_definition json,
  p_definition_hash text, p_fingerprint text, p_input json, p_parsed_input_hash text, p_owner_token text,
  p_lease_ms float8, p_retention_ms bigint, p_tombstone_ms bigint
) RETURNS TABLE (
  claimed boolean, workflow text, fingerprint text, status text, lease_remaining_ms float8, expired boolean,
  outcome text, parked_reason text, response_status integer, response_body text, wake_remaining_ms float8,
  completed_at timestamptz, expires_at timestamptz, tombstone_until timestamptz
) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
  FOR round IN 1..2 LOOP
    RETURN QUERY
    SELECT false AS claimed,
           r.workflow, r.fingerprint, r.status,
           GREATEST(0, ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000))::float8 AS lease_remaining_ms,
           (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
           r.outcome, r.parked_reason, r.response_status, r.response_body::text AS response_body,
           CASE WHEN r.status = 'suspended'
                THEN ceil(extract(epoch FROM (r.wake_at - clock_timestamp())) * 1000)::float8 END AS wake_remaining_ms,
           -- Only past retention (a replay computes nothing more than the two comparisons).
           CASE WHEN r.status = 'completed' AND r.expires_at <= clock_timestamp() THEN r.completed_at END AS completed_at,
           CASE WHEN r.status = 'completed' AND r.expires_at <= clock_timestamp() THEN r.expires_at END AS expires_at,
           CASE WHEN r.status = 'completed' AND r.expires_at <= clock_timestamp()
                 AND r.expires_at + r.tombstone_ms * interval '1 millisecond' > clock_timestamp()
                THEN r.expires_at + r.tombstone_ms * interval '1 millisecond' END AS tombstone_until
    FROM runs r
    WHERE r.tenant_id = p_tenant_id AND r.key = p_key;
    IF FOUND THEN
      RETURN;
    END IF;
    RETURN QUERY
    SELECT false, tb.workflow, encode(tb.fingerprint, 'hex'), 'completed'::text, NULL::float8, true,
           tb.outcome, NULL::text, NULL::integer, NULL::text, NULL::float8,
           tb.completed_at, tb.expired_at, tb.kept_until
    FROM tombstones tb
    WHERE tb.tenant_id = p_tenant_id AND tb.key_digest = key_digest(p_key) AND tb.kept_until > clock_timestamp();
    IF FOUND THEN
      RETURN;
    END IF;
    IF round = 2 THEN
      -- The record the INSERT collided with is gone again (forgotten, swept): the engine asks again.
      RETURN QUERY SELECT false, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8,
                          NULL::timestamptz, NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
    INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                      input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                      workflow_version, tombstone_ms)
    VALUES (p_tenant_id, p_key, p_run_id, p_workflow, p_definition,
            p_definition_hash, p_fingerprint, p_input, p_parsed_input_hash, 'in_flight',
            p_owner_token,
            clock_timestamp() + p_lease_ms * interval '1 millisecond', 1, p_retention_ms, p_workflow_version,
            p_tombstone_ms)
    ON CONFLICT (tenant_id, key) DO NOTHING;
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8,
                          NULL::timestamptz, NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
    -- A racing first request committed the key after the read: read again, in a new snapshot.
  END LOOP;
END
$$;

-- The claim of 0009, without tombstones (no tombstone_ms argument).
CREATE OR REPLACE FUNCTION claim_new_key(
  p_tenant_id text, p_key text, p_run_id text, p_workflow text, p_workflow_version integer, p_definition json,
  p_definition_hash text, p_fingerprint text, p_input json, p_parsed_input_hash text, p_owner_token text,
  p_lease_ms float8, p_retention_ms bigint
) RETURNS TABLE (
  claimed boolean, workflow text, fingerprint text, status text, lease_remaining_ms float8, expired boolean,
  outcome text, parked_reason text, response_status integer, response_body text, wake_remaining_ms float8
) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
  FOR round IN 1..2 LOOP
    RETURN QUERY
    SELECT false AS claimed,
           r.workflow, r.fingerprint, r.status,
           GREATEST(0, ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000))::float8 AS lease_remaining_ms,
           (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
           r.outcome, r.parked_reason, r.response_status, r.response_body::text AS response_body,
           CASE WHEN r.status = 'suspended'
                THEN ceil(extract(epoch FROM (r.wake_at - clock_timestamp())) * 1000)::float8 END AS wake_remaining_ms
    FROM runs r
    WHERE r.tenant_id = p_tenant_id AND r.key = p_key;
    IF FOUND THEN
      RETURN;
    END IF;
    IF round = 2 THEN
      -- The record the INSERT collided with is gone again (forgotten, swept): the engine asks again.
      RETURN QUERY SELECT false, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8;
      RETURN;
    END IF;
    INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                      input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                      workflow_version)
    VALUES (p_tenant_id, p_key, p_run_id, p_workflow, p_definition,
            p_definition_hash, p_fingerprint, p_input, p_parsed_input_hash, 'in_flight',
            p_owner_token,
            clock_timestamp() + p_lease_ms * interval '1 millisecond', 1, p_retention_ms, p_workflow_version)
    ON CONFLICT (tenant_id, key) DO NOTHING;
    IF FOUND THEN
      RETURN QUERY SELECT true, NULL::text, NULL::text, NULL::text, NULL::float8, NULL::boolean,
                          NULL::text, NULL::text, NULL::integer, NULL::text, NULL::float8;
      RETURN;
    END IF;
    -- A racing first request committed the key after the read: read again, in a new snapshot.
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- The takeover (0008)
-- ---------------------------------------------------------------------------

-- An in-flight run whose lease expired: a new owner token, a new lease and
-- one more attempt, or the run parked when its attempts ran out.
CREATE OR REPLACE FUNCTION take_over_expired_lease(
  p_tenant_id text, p_key text, p_owner_token text, p_lease_ms float8, p_fingerprint text,
  p_max_attempts integer, p_reason text
) RETURNS TABLE (
  status text, parked_reason text, run_id text, attempt integer, recovery_point text, state text, input text,
  definition text, definition_hash text, workflow text, parsed_input_hash text, workflow_version integer
) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH taken AS (
    UPDATE runs
    SET (status, owner_token, locked_until, attempt, parked_reason, parked_at) = (
          SELECT CASE WHEN x.exhausted THEN 'parked' ELSE 'in_flight' END,
                 CASE WHEN x.exhausted THEN NULL ELSE p_owner_token END,
                 CASE WHEN x.exhausted THEN NULL ELSE clock_timestamp() + p_lease_ms * interval '1 millisecond' END,
                 CASE WHEN x.exhausted THEN attempt ELSE attempt + 1 END,
                 CASE WHEN x.exhausted THEN p_reason END,
                 CASE WHEN x.exhausted THEN clock_timestamp() END
          FROM (SELECT attempt - attempt_floor >= p_max_attempts AS exhausted) AS x
        ),
        updated_at = clock_timestamp()
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND status = 'in_flight' AND locked_until <= clock_timestamp()
      AND (p_fingerprint IS NULL OR fingerprint = p_fingerprint)
    RETURNING status, parked_reason, run_id, attempt, recovery_point, state::text AS state, input::text AS input,
              definition::text AS definition, definition_hash, workflow, parsed_input_hash, workflow_version
  )
  SELECT * FROM taken;
END
$$;

-- ---------------------------------------------------------------------------
-- The completion (0014): the one statement that completes a run
-- ---------------------------------------------------------------------------

-- The tag a completion notification carries: MD5 hex of tenant, U+001F and key.
CREATE OR REPLACE FUNCTION completion_tag(p_tenant_id text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT md5(p_tenant_id || chr(31) || p_key)
$$;

-- Store the response, drop owner and lease, start retention, announce a
-- durable run; with the run's last item, also its recovery point and state
-- (and, past a wait, forget the wait). Fenced on the owner token, or an
-- operator's cancel (p_cancel) of any run not completed. Called by
-- advance_run and complete_run below, by the wait's
-- result (store/suspension.ts) and by cancel (store/transitions.ts).
CREATE OR REPLACE FUNCTION mark_completed(
  p_tenant_id text, p_key text, p_owner_token text, p_cancel boolean,
  p_outcome text, p_response_status integer, p_response_body json,
  p_recovery_point text, p_state json, p_past_wait boolean
) RETURNS SETOF runs LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_run runs;
BEGIN
  UPDATE runs
  SET recovery_point = COALESCE(p_recovery_point, recovery_point), state = COALESCE(p_state, state),
      wait_kind = CASE WHEN p_past_wait THEN NULL ELSE wait_kind END,
      wait_name = CASE WHEN p_past_wait THEN NULL ELSE wait_name END,
      wake_at = CASE WHEN p_past_wait THEN NULL ELSE wake_at END,
      wait_until = CASE WHEN p_past_wait THEN NULL ELSE wait_until END,
      status = 'completed', owner_token = NULL, locked_until = NULL, parked_reason = NULL, parked_at = NULL,
      outcome = p_outcome, response_status = p_response_status, response_body = p_response_body,
      expires_at = clock_timestamp() + retention_ms * interval '1 millisecond', completed_at = clock_timestamp(),
      updated_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key
    AND CASE WHEN p_cancel THEN status IN ('in_flight', 'parked', 'suspended')
             ELSE owner_token = p_owner_token AND status = 'in_flight' END
  RETURNING * INTO v_run;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_run.durable THEN
    PERFORM pg_notify('idempo_done', completion_tag(p_tenant_id, p_key));
  END IF;
  RETURN NEXT v_run;
END
$$;

-- ---------------------------------------------------------------------------
-- Progress: phase commit, step start and result, parallel branches,
-- completion, renewal (0008, 0013, 0014, 0019)
-- ---------------------------------------------------------------------------

-- A commit's write of the run (0014): the recovery point, the state and the
-- lease extended, or the run completed when the item is its last. Fenced in
-- both branches; shared by commit_phase and record_step_result.
CREATE OR REPLACE FUNCTION advance_run(
  p_tenant_id text, p_key text, p_owner_token text, p_name text, p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF p_response_status IS NULL THEN
    UPDATE runs
    SET recovery_point = p_name, state = p_state, updated_at = clock_timestamp(),
        locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND owner_token = p_owner_token AND status = 'in_flight';
  ELSE
    PERFORM 1 FROM mark_completed(p_tenant_id, p_key, p_owner_token, false,
                                  p_outcome, p_response_status, p_response_body, p_name, p_state, false);
  END IF;
  RETURN FOUND;
END
$$;

-- A phase commit: the run advanced past the phase (or completed), then the
-- phase's history entry. Fenced: a zombie attempt matches nothing and gets false.
CREATE OR REPLACE FUNCTION commit_phase(
  p_tenant_id text, p_key text, p_owner_token text, p_run_id text, p_entry_id text, p_name text,
  p_attempt integer, p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NOT advance_run(p_tenant_id, p_key, p_owner_token, p_name, p_state, p_lease_ms,
                     p_outcome, p_response_status, p_response_body) THEN
    RETURN false;
  END IF;
  INSERT INTO run_history (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at, finished_at)
  VALUES (p_tenant_id, p_key, p_run_id, p_entry_id, 'phase', p_name, p_attempt, 'succeeded', now(), clock_timestamp());
  RETURN true;
END
$$;

-- A step about to be called: earlier attempts' open entries of the same step
-- become 'interrupted', and a 'started' entry is written, only while the
-- attempt owns the key. Returns owned = 0 when it does not.
CREATE OR REPLACE FUNCTION record_step_started(
  p_tenant_id text, p_key text, p_owner_token text, p_run_id text, p_entry_id text, p_name text,
  p_attempt integer, p_derived_key text
) RETURNS TABLE (owned integer, prior_starts integer) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  RETURN QUERY
  WITH owner AS (
    SELECT 1 FROM runs
    WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
  ), prior AS (
    SELECT count(*)::int AS n FROM run_history
    WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
      AND kind = 'step' AND name = p_name
  ), interrupted AS (
    -- Earlier attempts that started this step and never recorded it were cut off.
    UPDATE run_history SET outcome = 'interrupted', finished_at = clock_timestamp()
    WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
      AND kind = 'step' AND name = p_name AND outcome = 'started' AND EXISTS (SELECT 1 FROM owner)
  ), started AS (
    INSERT INTO run_history (tenant_id, key, run_id, entry_id, kind, name, attempt, derived_key, outcome, started_at)
    SELECT p_tenant_id, p_key, p_run_id, p_entry_id, 'step', p_name, p_attempt,
           p_derived_key, 'started', clock_timestamp()
    FROM owner
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM started)::int, (SELECT n FROM prior);
END
$$;

-- A step's result: the run advanced past the step (or completed), then its
-- history entry closed with its tries (0013).
CREATE OR REPLACE FUNCTION record_step_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_step_outcome text, p_name text,
  p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json, p_tries json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NOT advance_run(p_tenant_id, p_key, p_owner_token, p_name, p_state, p_lease_ms,
                     p_outcome, p_response_status, p_response_body) THEN
    RETURN false;
  END IF;
  UPDATE run_history SET outcome = p_step_outcome, finished_at = clock_timestamp(), tries = p_tries
  WHERE tenant_id = p_tenant_id AND key = p_key AND entry_id = p_entry_id;
  RETURN true;
END
$$;

-- The same without the tries, for the release before 0013.
CREATE OR REPLACE FUNCTION record_step_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_step_outcome text, p_name text,
  p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  RETURN record_step_result(p_tenant_id, p_key, p_owner_token, p_entry_id, p_step_outcome, p_name,
                            p_state, p_lease_ms, p_outcome, p_response_status, p_response_body, NULL::json);
END
$$;

-- A branch about to be called (0019), as record_step_started is for a step: earlier
-- attempts' open entries of the same branch become 'interrupted', and a
-- 'started' entry is written, only while the attempt owns the key. Returns
-- owned = 0 when it does not, and how many entries the branch has in this run.
CREATE OR REPLACE FUNCTION record_branch_started(
  p_tenant_id text, p_key text, p_owner_token text, p_run_id text, p_entry_id text, p_name text, p_branch text,
  p_attempt integer, p_derived_key text
) RETURNS TABLE (owned integer, prior_starts integer) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  RETURN QUERY
  WITH owner AS (
    SELECT 1 FROM runs
    WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
  ), prior AS (
    SELECT count(*)::int AS n FROM run_history
    WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
      AND kind = 'branch' AND name = p_name AND branch = p_branch
  ), interrupted AS (
    UPDATE run_history SET outcome = 'interrupted', finished_at = clock_timestamp()
    WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
      AND kind = 'branch' AND name = p_name AND branch = p_branch AND outcome = 'started'
      AND EXISTS (SELECT 1 FROM owner)
  ), started AS (
    INSERT INTO run_history (tenant_id, key, run_id, entry_id, kind, name, branch, attempt, derived_key, outcome, started_at)
    SELECT p_tenant_id, p_key, p_run_id, p_entry_id, 'branch', p_name, p_branch, p_attempt,
           p_derived_key, 'started', clock_timestamp()
    FROM owner
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM started)::int, (SELECT n FROM prior);
END
$$;

-- A branch's result (0019): its entry closed with the result and its tries, while
-- the attempt owns the key. The lease is extended by the same UPDATE of the
-- run, whose row lock orders the write against a takeover: a zombie records
-- nothing once another attempt holds the key.
CREATE OR REPLACE FUNCTION record_branch_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_branch_outcome text, p_result json,
  p_lease_ms float8, p_tries json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE runs SET locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond', updated_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE run_history
  SET outcome = p_branch_outcome, finished_at = clock_timestamp(), tries = p_tries, result = p_result
  WHERE tenant_id = p_tenant_id AND key = p_key AND entry_id = p_entry_id;
  RETURN true;
END
$$;

-- A parallel item done (0019): the run advanced past it (or completed) with the
-- branches' results in its state, the item's entry written (from the first
-- start of the branches it keeps), and the kept results dropped from the
-- branch entries, which the state now holds.
CREATE OR REPLACE FUNCTION commit_parallel(
  p_tenant_id text, p_key text, p_owner_token text, p_run_id text, p_entry_id text, p_name text,
  p_attempt integer, p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_started timestamptz;
BEGIN
  IF NOT advance_run(p_tenant_id, p_key, p_owner_token, p_name, p_state, p_lease_ms,
                     p_outcome, p_response_status, p_response_body) THEN
    RETURN false;
  END IF;
  SELECT min(started_at) INTO v_started FROM run_history
  WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
    AND kind = 'branch' AND name = p_name AND result IS NOT NULL;
  INSERT INTO run_history (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at, finished_at)
  VALUES (p_tenant_id, p_key, p_run_id, p_entry_id, 'parallel', p_name, p_attempt, 'succeeded',
          COALESCE(v_started, now()), clock_timestamp());
  UPDATE run_history SET result = NULL
  WHERE tenant_id = p_tenant_id AND key = p_key AND run_id = p_run_id
    AND kind = 'branch' AND name = p_name AND result IS NOT NULL;
  RETURN true;
END
$$;

-- A completion without a new recovery point (ctx.fail, a stored unknown error,
-- a wait's timeout, nothing after the last recovery point).
CREATE OR REPLACE FUNCTION complete_run(
  p_tenant_id text, p_key text, p_owner_token text,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM mark_completed(p_tenant_id, p_key, p_owner_token, false,
                                p_outcome, p_response_status, p_response_body, NULL, NULL, false);
  RETURN FOUND;
END
$$;

-- The heartbeat: the lease extended while the attempt still owns the key.
CREATE OR REPLACE FUNCTION renew_lease(
  p_tenant_id text, p_key text, p_owner_token text, p_lease_ms float8
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE runs SET locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight';
  RETURN FOUND;
END
$$;

-- ---------------------------------------------------------------------------
-- Concurrency slots and rate limits (0018)
-- ---------------------------------------------------------------------------

-- True while the attempt (tenant, key, owner token) holds its run in
-- flight under a lease that has not run out: what holding a slot means.
CREATE OR REPLACE FUNCTION slot_holder_live(p_tenant_id text, p_key text, p_owner_token text) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
  SELECT EXISTS (
    SELECT 1 FROM runs
    WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token
      AND status = 'in_flight' AND locked_until > clock_timestamp()
  )
$$;

-- How many of the first p_max slots of a key are held now.
CREATE OR REPLACE FUNCTION concurrency_slots_held(p_limit_key text, p_max integer) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
  SELECT count(*)::int FROM concurrency_slots
  WHERE limit_key = p_limit_key AND slot < p_max AND slot_holder_live(tenant_id, key, owner_token)
$$;

-- Take a free slot of p_limit_key for the attempt that owns the run
-- (answer 'acquired'), or, with every one of its p_max slots held, step the
-- run aside: suspended, due, no owner (answer 'full', with the ms until the
-- first holder's lease ends); 'lost' when the attempt no longer owns the run.
-- Races: two takers of one slot, and a taker against the holder's renewal.
-- A slot that looks free is locked (SKIP LOCKED: a row another taker or a
-- renewal holds is held) before its holder is read again, in a new
-- statement, so that read sees every commit made before the lock; the
-- holder's renewal locks the row too. A slot freed after the first look is
-- missed (the answer is 'full' once), never one taken twice.
CREATE OR REPLACE FUNCTION acquire_concurrency_slot(
  p_tenant_id text, p_key text, p_owner_token text, p_limit_key text, p_max integer
) RETURNS TABLE (outcome text, retry_after_ms float8) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_slot integer;
BEGIN
  IF (SELECT count(*) FROM concurrency_slots WHERE limit_key = p_limit_key AND slot < p_max) < p_max THEN
    INSERT INTO concurrency_slots (limit_key, slot)
    SELECT p_limit_key, g FROM generate_series(0, p_max - 1) AS g
    ON CONFLICT (limit_key, slot) DO NOTHING;
  END IF;
  -- The slots that look free in this snapshot; each is locked and read again before it is taken.
  FOR v_slot IN
    SELECT s.slot FROM concurrency_slots s
    WHERE s.limit_key = p_limit_key AND s.slot < p_max AND NOT slot_holder_live(s.tenant_id, s.key, s.owner_token)
    ORDER BY s.slot
  LOOP
    PERFORM 1 FROM concurrency_slots WHERE limit_key = p_limit_key AND slot = v_slot FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    UPDATE concurrency_slots s SET tenant_id = p_tenant_id, key = p_key, owner_token = p_owner_token
    WHERE s.limit_key = p_limit_key AND s.slot = v_slot AND NOT slot_holder_live(s.tenant_id, s.key, s.owner_token);
    IF FOUND THEN
      UPDATE runs SET concurrency_key = p_limit_key, concurrency_max = p_max
      WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
        AND (concurrency_key IS DISTINCT FROM p_limit_key OR concurrency_max IS DISTINCT FROM p_max);
      RETURN QUERY SELECT 'acquired'::text, NULL::float8;
      RETURN;
    END IF;
  END LOOP;
  -- Every slot is held: the run waits as a due suspended run, keeping its
  -- place in wake-up order and its wait's deadline; a sleep it woke from is over.
  UPDATE runs
  SET status = 'suspended', owner_token = NULL, locked_until = NULL, durable = true,
      wake_at = LEAST(coalesce(wake_at, clock_timestamp()), clock_timestamp()),
      wait_kind = CASE WHEN wait_kind = 'sleep' THEN NULL ELSE wait_kind END,
      wait_name = CASE WHEN wait_kind = 'sleep' THEN NULL ELSE wait_name END,
      concurrency_key = p_limit_key, concurrency_max = p_max, updated_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight';
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'lost'::text, NULL::float8;
    RETURN;
  END IF;
  RETURN QUERY
  SELECT 'full'::text,
         coalesce(GREATEST(1, ceil(min(extract(epoch FROM (h.locked_until - clock_timestamp())) * 1000))), 1)::float8
  FROM concurrency_slots s
  JOIN runs h ON h.tenant_id = s.tenant_id AND h.key = s.key AND h.owner_token = s.owner_token
  WHERE s.limit_key = p_limit_key AND s.slot < p_max
    AND h.status = 'in_flight' AND h.locked_until > clock_timestamp();
END
$$;

-- The heartbeat of an attempt that holds a slot: renew_lease, only while
-- the slot is still its own. The slot row is locked first (KEY SHARE), so
-- a taker that found the lease run out and took the slot makes this
-- renewal fail, and a taker that comes later finds the lease renewed.
CREATE OR REPLACE FUNCTION renew_slot_lease(
  p_tenant_id text, p_key text, p_owner_token text, p_lease_ms float8, p_limit_key text
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM concurrency_slots
  WHERE limit_key = p_limit_key AND tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token
  FOR KEY SHARE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN renew_lease(p_tenant_id, p_key, p_owner_token, p_lease_ms);
END
$$;

-- Take one token of the bucket p_name (p_per_ms tokens per ms, at most
-- p_burst stored; the bucket starts full), under its row lock: answer
-- taken with the ms until the token is earned (0 when one is there). A
-- token due within p_max_wait_ms (NULL: any time) is reserved now, so the
-- caller sleeps that long and goes, and later callers queue behind it; one
-- due later is not taken (taken false, and the ms until one would be due).
CREATE OR REPLACE FUNCTION take_rate_token(
  p_name text, p_per_ms float8, p_burst float8, p_max_wait_ms float8
) RETURNS TABLE (taken boolean, wait_ms float8) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_tokens float8;
  v_at timestamptz;
  v_now timestamptz;
  v_avail float8;
  v_wait float8;
BEGIN
  SELECT r.tokens, r.refilled_at INTO v_tokens, v_at FROM rate_limits r WHERE r.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO rate_limits (name, tokens, refilled_at) VALUES (p_name, p_burst, clock_timestamp())
    ON CONFLICT (name) DO NOTHING;
    SELECT r.tokens, r.refilled_at INTO v_tokens, v_at FROM rate_limits r WHERE r.name = p_name FOR UPDATE;
  END IF;
  -- Read after the lock: the tokens as every earlier taker left them.
  v_now := clock_timestamp();
  v_avail := LEAST(p_burst, v_tokens + GREATEST(0, extract(epoch FROM (v_now - v_at)) * 1000) * p_per_ms);
  v_wait := GREATEST(0, (1 - v_avail) / p_per_ms);
  IF p_max_wait_ms IS NULL OR v_wait <= p_max_wait_ms THEN
    UPDATE rate_limits SET tokens = v_avail - 1, refilled_at = v_now WHERE name = p_name;
    RETURN QUERY SELECT true, ceil(v_wait)::float8;
  ELSE
    RETURN QUERY SELECT false, ceil(v_wait)::float8;
  END IF;
END
$$;
