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
-- 0010-0013, 0017-0019, in the order the migrations added them)
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
  -- A child run (0020): its parent's key and run id, the `.child` or `.map`
  -- item that started it and its index in the item's inputs; NULL otherwise.
  parent_key       text,
  parent_run_id    text,
  parent_item      text,
  child_index      integer,
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
  -- children: a parent waits for its children; queued: a child waits for a slot of its map's concurrency (0020).
  CONSTRAINT runs_wait_kind_check CHECK (wait_kind IN ('sleep', 'signal', 'children', 'queued'))
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
    CHECK (kind IN ('phase', 'step', 'sleep', 'wait', 'parallel', 'branch', 'child', 'map')),
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

-- A parent's children by item, in input order (0020).
CREATE INDEX runs_children ON runs (tenant_id, parent_key, parent_item, child_index) WHERE parent_key IS NOT NULL;
-- The sweeper's repair: children not completed, whose parent may have ended without them.
CREATE INDEX runs_open_children ON runs (tenant_id, parent_key) WHERE parent_key IS NOT NULL AND status <> 'completed';


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
-- Workflow versions and the SQL interface's row types (0017)
-- ===========================================================================

-- The workflow versions workers run, written by each worker when it starts
-- (engine.startWorker): what enqueue needs to create a run of a workflow it
-- knows only by name. Named across tenants, like schedules: a small table
-- of configuration (under Citus, a reference table).
CREATE TABLE workflow_versions (
  workflow        text        NOT NULL,
  version         integer     NOT NULL,
  -- The ordered "kind:name" list and its hash, as runs.definition holds them.
  definition      json        NOT NULL,
  definition_hash text        NOT NULL,
  -- The worker's engine's resolved retention and tombstone time, in ms.
  retention_ms    bigint      NOT NULL,
  tombstone_ms    bigint      NOT NULL,
  registered_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT workflow_versions_pkey PRIMARY KEY (workflow, version)
);

-- What inspect and cancel return: one key's record (or its tombstone, with
-- status 'expired' and only workflow, outcome and times), with its history.
CREATE TYPE run_record AS (
  tenant_id text,
  key text,
  run_id text,
  workflow text,
  workflow_version integer,
  status text,
  outcome text,
  response_status integer,
  response_body json,
  parked_reason text,
  waiting_for_kind text,
  waiting_for_name text,
  wake_at timestamptz,
  recovery_point text,
  attempt integer,
  lease_remaining_ms float8,
  input json,
  state json,
  created_at timestamptz,
  updated_at timestamptz,
  completed_at timestamptz,
  expires_at timestamptz,
  expired boolean,
  tombstone_until timestamptz,
  history json
);

-- What list_runs returns for each record: what a listing shows, and the
-- cursor that continues after it.
CREATE TYPE run_summary AS (
  tenant_id text,
  key text,
  workflow text,
  workflow_version integer,
  status text,
  parked_reason text,
  waiting_for_kind text,
  waiting_for_name text,
  wake_at timestamptz,
  recovery_point text,
  attempt integer,
  lease_remaining_ms float8,
  outcome text,
  response_status integer,
  created_at timestamptz,
  updated_at timestamptz,
  cursor text
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
-- (and, past a wait, forget the wait). Fenced on the owner token and, for a
-- run under a concurrency limit, its slot (slot_commit_allowed, 0022), or
-- an operator's cancel (p_cancel) of any run not completed. Called by
-- advance_run and complete_run below, by the moves past a waited item
-- (store/progress.ts) and by cancel (store/transitions.ts).
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
    AND (p_cancel OR concurrency_key IS NULL
         OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until))
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

-- A commit's write of the run (0014, 0022, 0025): the recovery point, the
-- state and the lease extended, or the run completed when the item is its
-- last. Fenced in both branches (the owner token, and for a run under a
-- concurrency limit its slot: slot_commit_allowed, asked in the completing
-- branch by mark_completed itself); shared by commit_phase and
-- record_step_result.
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
      AND owner_token = p_owner_token AND status = 'in_flight'
      AND (concurrency_key IS NULL
           OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until));
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

-- A branch's result (0019): its entry closed with the result and its tries,
-- while the attempt owns the key and, for a run under a concurrency limit,
-- its slot (slot_commit_allowed, 0022, 0024). The lease is extended by the same
-- UPDATE of the run, whose row lock orders the write against a takeover: a
-- zombie records nothing once another attempt holds the key or the slot.
CREATE OR REPLACE FUNCTION record_branch_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_branch_outcome text, p_result json,
  p_lease_ms float8, p_tries json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE runs SET locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond', updated_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
    AND (concurrency_key IS NULL
         OR slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until));
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

-- (0022) True when the attempt may commit under its run's concurrency limit
-- p_limit_key: the slot that names it, locked FOR KEY SHARE until the
-- commit, or no slot and a live lease (p_locked_until is the run's).
CREATE OR REPLACE FUNCTION slot_commit_allowed(
  p_tenant_id text, p_key text, p_owner_token text, p_limit_key text, p_locked_until timestamptz
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM concurrency_slots
  WHERE limit_key = p_limit_key AND tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token
  FOR KEY SHARE;
  RETURN FOUND OR p_locked_until > clock_timestamp();
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

-- ---------------------------------------------------------------------------
-- The SQL interface for other languages (0017): enqueue, signal, inspect,
-- cancel, list_runs, and the checks, canonical JSON and fingerprints they
-- share with the engine (docs/sql-api.md). Errors are SQLSTATE class IP,
-- the message starting with the engine's error code.
-- ---------------------------------------------------------------------------

-- Raise one of the interface's errors: SQLSTATE p_sqlstate (class IP), the
-- message the TypeScript error has, after its code and a colon.
CREATE OR REPLACE FUNCTION raise_error(p_sqlstate text, p_code text, p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = p_sqlstate, MESSAGE = p_code || ': ' || p_message;
END
$$;

-- How every message names a key, as errors.ts does.
CREATE OR REPLACE FUNCTION key_name(p_tenant_id text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 'idempotency key ''' || p_key || ''' (tenant ''' || p_tenant_id || ''')'
$$;

-- A time as JavaScript's toISOString prints it (UTC, milliseconds).
CREATE OR REPLACE FUNCTION iso_time(p_time timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_char(p_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The key rules of keys/key-validation.ts, in its order and words: a
-- string, not empty, at most 255 UTF-8 bytes, no control character
-- (category Cc), not only whitespace (what String.prototype.trim removes;
-- the control characters among it are refused before).
CREATE OR REPLACE FUNCTION check_key(p_value text, p_what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
BEGIN
  IF p_value IS NULL THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must be a string, got null');
  ELSIF p_value = '' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not be empty');
  ELSIF octet_length(p_value) > 255 THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' is longer than 255 UTF-8 bytes');
  ELSIF p_value ~ '[\u0001-\u001f\u007f-\u009f]' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not contain control characters');
  ELSIF p_value ~ '^[\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$' THEN
    PERFORM raise_error('IP001', 'invalid_key', p_what || ' must not be only whitespace');
  END IF;
END
$$;

-- The pair that names a run, tenant id first.
CREATE OR REPLACE FUNCTION check_run_key(p_tenant_id text, p_key text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM check_key(p_tenant_id, 'tenant id');
  PERFORM check_key(p_key, 'idempotency key');
END
$$;

-- A new ULID (26 Crockford base32 characters: 48 bits of milliseconds, 80
-- random bits), the form of the engine's ids.
CREATE OR REPLACE FUNCTION new_id() RETURNS text
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', substring(b.bits FROM i * 5 + 1 FOR 5)::integer + 1, 1),
                    '' ORDER BY i)
  FROM (SELECT B'00'
               || substring((floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)::bit(64) FROM 17 FOR 48)
               || substring(('x' || md5(gen_random_uuid()::text || gen_random_uuid()::text))::bit(128) FROM 1 FOR 80)
               AS bits) AS b,
       generate_series(0, 25) AS i
$$;

-- ---------------------------------------------------------------------------
-- Canonical JSON (RFC 8785) and fingerprints, equal to json/fingerprint.ts
-- ---------------------------------------------------------------------------

-- A string whose order under COLLATE "C" (code points) is the UTF-16 code
-- unit order of p_text: each code unit from U+D800 up is moved above the
-- BMP (a character of U+E000-U+FFFF by 0x10000, a supplementary one as its
-- two surrogates, each moved by 0x10000), so a supplementary character
-- sorts below U+E000 as in JavaScript. Below U+D800 nothing changes.
CREATE OR REPLACE FUNCTION utf16_sort_key(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT string_agg(CASE WHEN s.cp < 55296 THEN s.c
                         WHEN s.cp < 65536 THEN chr(s.cp + 65536)
                         ELSE chr(55296 + ((s.cp - 65536) >> 10) + 65536) || chr(56320 + ((s.cp - 65536) & 1023) + 65536)
                    END, '' ORDER BY s.n)
  FROM (SELECT t.c, ascii(t.c) AS cp, t.n FROM regexp_split_to_table(p_text, '') WITH ORDINALITY AS t (c, n)) AS s
$$;

-- A number as ECMAScript's Number::toString spells the double nearest to
-- it (what JSON.stringify and so JCS write), or NULL when no finite double
-- holds it (beyond about 1.8e308, or so small that it reads as 0). The
-- server's float8 output with extra_float_digits >= 1 gives the shortest
-- digits strictly inside the double's rounding interval; ECMAScript also
-- takes a bound of the interval when it reads back as the same double (a
-- tie that rounds to the even neighbour), so the digits one shorter are
-- tried, rounded down and up, while one of them reads back as the double,
-- the nearer one winning. Then only where the digits go (fixed or exponent
-- form) is rewritten.
-- True when p_text reads as the double p_double; false when it reads as
-- none (beyond the double range either way).
CREATE OR REPLACE FUNCTION json_number_reads_as(p_text text, p_double float8) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  RETURN p_text::float8 = p_double;
EXCEPTION WHEN numeric_value_out_of_range THEN
  RETURN false;
END
$$;

CREATE OR REPLACE FUNCTION json_number_text(p_number numeric) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET extra_float_digits = 1 AS $$
DECLARE
  v_double float8;
  v_text text;
  v_sign text := '';
  v_exp integer := 0;
  v_at integer;
  v_int text;
  v_frac text := '';
  v_digits text;
  v_point integer;
  v_len integer;
  v_down text;
  v_up text;
  v_down_ok boolean;
  v_up_ok boolean;
  v_pick text;
BEGIN
  IF p_number = 0 THEN
    RETURN '0';
  END IF;
  IF abs(p_number) >= 1e308 OR abs(p_number) < 1e-307 THEN
    BEGIN
      v_double := p_number::float8;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      RETURN NULL;
    END;
  ELSE
    v_double := p_number::float8;
  END IF;
  v_text := v_double::text;
  IF left(v_text, 1) = '-' THEN
    v_sign := '-';
    v_text := substr(v_text, 2);
    v_double := -v_double;
  END IF;
  v_at := strpos(v_text, 'e');
  IF v_at > 0 THEN
    v_exp := substr(v_text, v_at + 1)::integer;
    v_text := left(v_text, v_at - 1);
  END IF;
  v_at := strpos(v_text, '.');
  IF v_at > 0 THEN
    v_int := left(v_text, v_at - 1);
    v_frac := substr(v_text, v_at + 1);
  ELSE
    v_int := v_text;
  END IF;
  -- The value is 0.<digits> * 10^v_point.
  v_digits := v_int || v_frac;
  v_point := length(v_int) + v_exp - (length(v_digits) - length(ltrim(v_digits, '0')));
  v_digits := rtrim(ltrim(v_digits, '0'), '0');
  v_len := length(v_digits);
  -- A bound that reads back as the double: <digits>e<n> is 0.<digits> * 10^v_point
  -- when n = v_point - (the digits' count).
  WHILE v_len > 1 LOOP
    v_down := left(v_digits, v_len - 1);
    v_up := (v_down::numeric + 1)::text;
    IF v_point BETWEEN -300 AND 300 THEN
      v_down_ok := (v_down || 'e' || (v_point - v_len + 1))::float8 = v_double;
      v_up_ok := (v_up || 'e' || (v_point - v_len + 1))::float8 = v_double;
    ELSE
      v_down_ok := json_number_reads_as(v_down || 'e' || (v_point - v_len + 1), v_double);
      v_up_ok := json_number_reads_as(v_up || 'e' || (v_point - v_len + 1), v_double);
    END IF;
    EXIT WHEN NOT (v_down_ok OR v_up_ok);
    IF v_down_ok AND v_up_ok THEN
      v_pick := CASE WHEN v_digits::numeric - (v_down || '0')::numeric <= (v_up || '0')::numeric - v_digits::numeric
                     THEN v_down ELSE v_up END;
    ELSE
      v_pick := CASE WHEN v_down_ok THEN v_down ELSE v_up END;
    END IF;
    v_point := v_point + length(v_pick) - (v_len - 1);
    v_digits := rtrim(v_pick, '0');
    v_len := length(v_digits);
  END LOOP;
  IF v_len <= v_point AND v_point <= 21 THEN
    RETURN v_sign || v_digits || repeat('0', v_point - v_len);
  ELSIF 0 < v_point AND v_point <= 21 THEN
    RETURN v_sign || left(v_digits, v_point) || '.' || substr(v_digits, v_point + 1);
  ELSIF -6 < v_point AND v_point <= 0 THEN
    RETURN v_sign || '0.' || repeat('0', -v_point) || v_digits;
  END IF;
  RETURN v_sign || left(v_digits, 1) || CASE WHEN v_len > 1 THEN '.' || substr(v_digits, 2) ELSE '' END
         || 'e' || CASE WHEN v_point > 0 THEN '+' ELSE '-' END || abs(v_point - 1)::text;
END
$$;

-- The JCS spelling of a jsonb number's text (always plain decimal, never an
-- exponent). Inlined by the planner; the common cases need no float8: an
-- integer of at most 15 digits, and a decimal of at most 15 digits that is
-- not below 1e-6 (every decimal of 15 significant digits is the shortest
-- spelling of its double), which only loses trailing zeros.
CREATE OR REPLACE FUNCTION canonical_number(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN length(p_text) > 16 OR p_text LIKE '0.000000%' OR p_text LIKE '-0.000000%'
      THEN json_number_text(p_text::numeric)
    WHEN strpos(p_text, '.') = 0
      THEN CASE WHEN length(p_text) <= 15 THEN p_text ELSE json_number_text(p_text::numeric) END
    ELSE rtrim(rtrim(p_text, '0'), '.')
  END
$$;

-- The JCS text of a value at nesting depth p_depth (the whole value is at
-- 0), or NULL when something in it is refused: a number no double holds, or
-- a value nested deeper than 512 levels (json/json-value.ts's bound).
-- Strings, true, false and null are jsonb's own text: it escapes exactly
-- what JSON.stringify escapes (", \, and U+0000-U+001F, as \b \t \n \f \r
-- or lower-case \u00XX). The subqueries keep OFFSET 0 so the planner does
-- not pull them up and call the recursion once per reference.
CREATE OR REPLACE FUNCTION canonical_json_at(p_value jsonb, p_depth integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  v_type text := jsonb_typeof(p_value);
  v_text text;
  v_bad boolean;
BEGIN
  -- A member or element of a container at depth 512 is at 513: refused before the recursion goes deeper.
  IF p_depth >= 512 AND v_type IN ('object', 'array') AND p_value NOT IN ('{}'::jsonb, '[]'::jsonb) THEN
    RETURN NULL;
  END IF;
  IF v_type = 'object' THEN
    SELECT '{' || coalesce(string_agg(m.member, ',' ORDER BY m.sort_key COLLATE "C"), '') || '}',
           coalesce(bool_or(m.member IS NULL), false)
    INTO v_text, v_bad
    FROM (SELECT CASE WHEN e.key ~ '[\ue000-\U0010ffff]' THEN utf16_sort_key(e.key) ELSE e.key END AS sort_key,
                 to_jsonb(e.key)::text || ':' || CASE jsonb_typeof(e.value)
                   WHEN 'object' THEN canonical_json_at(e.value, p_depth + 1)
                   WHEN 'array' THEN canonical_json_at(e.value, p_depth + 1)
                   WHEN 'number' THEN canonical_number(e.value::text)
                   ELSE e.value::text END AS member
          FROM jsonb_each(p_value) AS e OFFSET 0) AS m;
  ELSIF v_type = 'array' THEN
    SELECT '[' || coalesce(string_agg(m.item, ',' ORDER BY m.n), '') || ']', coalesce(bool_or(m.item IS NULL), false)
    INTO v_text, v_bad
    FROM (SELECT a.n, CASE jsonb_typeof(a.value)
                   WHEN 'object' THEN canonical_json_at(a.value, p_depth + 1)
                   WHEN 'array' THEN canonical_json_at(a.value, p_depth + 1)
                   WHEN 'number' THEN canonical_number(a.value::text)
                   ELSE a.value::text END AS item
          FROM jsonb_array_elements(p_value) WITH ORDINALITY AS a (value, n) OFFSET 0) AS m;
  ELSIF v_type = 'number' THEN
    RETURN canonical_number(p_value::text);
  ELSE
    RETURN p_value::text;
  END IF;
  RETURN CASE WHEN v_bad THEN NULL ELSE v_text END;
END
$$;

-- The RFC 8785 canonical JSON text of a value, as json/fingerprint.ts
-- writes it for the same value; NULL when canonical_json_at refuses it.
CREATE OR REPLACE FUNCTION canonical_json(p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path FROM CURRENT AS $$
  SELECT canonical_json_at(p_value, 0)
$$;

-- A path as json/json-path.ts prints it, after p_root ('$', 'payload',
-- 'body'): `.name` or `."a b"` for a member, `[3]` for an element, and past
-- twelve segments the first four and the last two around a count.
CREATE OR REPLACE FUNCTION json_path_text(p_root text, p_segments text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT p_root || CASE
    WHEN coalesce(cardinality(p_segments), 0) <= 12 THEN array_to_string(p_segments, '')
    ELSE array_to_string(p_segments[1:4], '') || '…(' || (cardinality(p_segments) - 6)::text || ' levels)…'
         || array_to_string(p_segments[cardinality(p_segments) - 1:], '')
  END
$$;

-- The first thing canonical_json_at refuses in a value, as
-- `<path>: <message>` with the path after p_root; NULL when there is none.
-- Depth first, members in jsonb's order, without recursion (a stack of
-- what is left to look at), so a deep value costs no server stack.
CREATE OR REPLACE FUNCTION json_issue(p_value jsonb, p_root text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
  v_stack jsonb[] := ARRAY[jsonb_build_object('v', p_value, 'p', '[]'::jsonb)];
  v_size integer := 1;
  v_top jsonb;
  v_value jsonb;
  v_path jsonb;
  v_segments text[];
  v_child record;
BEGIN
  WHILE v_size > 0 LOOP
    v_top := v_stack[v_size];
    v_size := v_size - 1;
    v_value := v_top -> 'v';
    v_path := v_top -> 'p';
    IF jsonb_array_length(v_path) > 512 THEN
      v_segments := ARRAY(SELECT jsonb_array_elements_text(v_path));
      RETURN json_path_text(p_root, v_segments) || ': nested deeper than 512 levels';
    END IF;
    IF jsonb_typeof(v_value) = 'number' THEN
      IF canonical_number(v_value::text) IS NULL THEN
        v_segments := ARRAY(SELECT jsonb_array_elements_text(v_path));
        RETURN json_path_text(p_root, v_segments)
               || ': number out of the range of a double (JSON numbers are read as IEEE 754 doubles)';
      END IF;
    ELSIF jsonb_typeof(v_value) IN ('object', 'array') THEN
      -- Pushed last to first, so the first member is looked at first.
      FOR v_child IN
        SELECT e.n, jsonb_build_object('v', e.value, 'p', v_path || to_jsonb(
                 CASE WHEN e.key ~ '^[A-Za-z_$][A-Za-z0-9_$]*$' THEN '.' || e.key ELSE '.' || to_jsonb(e.key)::text END)) AS item
        FROM jsonb_each(CASE WHEN jsonb_typeof(v_value) = 'object' THEN v_value ELSE '{}' END)
             WITH ORDINALITY AS e (key, value, n)
        UNION ALL
        SELECT a.n, jsonb_build_object('v', a.value, 'p', v_path || to_jsonb('[' || (a.n - 1)::text || ']'))
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v_value) = 'array' THEN v_value ELSE '[]' END)
             WITH ORDINALITY AS a (value, n)
        ORDER BY 1 DESC
      LOOP
        v_size := v_size + 1;
        v_stack[v_size] := v_child.item;
      END LOOP;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- A value the interface stores (input, signal payload, cancel body): its
-- canonical text, after the engine's checks in their order. p_root names it
-- in issue paths, p_what in the size error ("the input").
-- invalid_input (IP002) for SQL NULL or a value canonical_json refuses;
-- payload_too_large (IP003) over p_max_bytes of canonical UTF-8, the bound
-- the engine applies (createEngine's maxPayloadBytes).
CREATE OR REPLACE FUNCTION checked_json(p_value jsonb, p_root text, p_what text, p_max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
  v_text text;
BEGIN
  IF p_max_bytes IS NULL OR p_max_bytes < 1 OR p_max_bytes > 1073741823 THEN
    PERFORM raise_error('IP010', 'invalid_option',
                        'max_payload_bytes must be an integer from 1 to 1073741823, got ' || coalesce(p_max_bytes::text, 'null'));
  END IF;
  IF p_value IS NULL THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: ' || p_root || ': SQL NULL is not a JSON value (pass ''null''::jsonb for JSON null)');
  END IF;
  v_text := canonical_json(p_value);
  IF v_text IS NULL THEN
    PERFORM raise_error('IP002', 'invalid_input', 'invalid input: ' || json_issue(p_value, p_root));
  END IF;
  IF octet_length(v_text) > p_max_bytes THEN
    PERFORM raise_error('IP003', 'payload_too_large',
                        p_what || ' is ' || octet_length(v_text)::text || ' bytes as canonical JSON, over the engine''s '
                        || 'maxPayloadBytes of ' || p_max_bytes::text || '; nothing was stored: keep large data elsewhere '
                        || 'and pass a reference, or raise maxPayloadBytes');
  END IF;
  RETURN v_text;
END
$$;

-- SHA-256 hex over a name, a NUL byte and a canonical text: the request
-- fingerprint (name = the workflow) and the signal's (name = 'signal:' and
-- the signal's name), as json/fingerprint.ts computes them.
CREATE OR REPLACE FUNCTION request_fingerprint(p_name text, p_canonical text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT encode(sha256(convert_to(p_name, 'UTF8') || '\x00'::bytea || convert_to(p_canonical, 'UTF8')), 'hex')
$$;

-- ---------------------------------------------------------------------------
-- The interface: enqueue, signal, inspect, cancel, list_runs
-- ---------------------------------------------------------------------------

-- engine.enqueue for a caller that knows the workflow by name: create the
-- run in the caller's transaction (it exists once that commits; workers are
-- told on commit), suspended and due at once, under the newest version a
-- worker registered. Same admission as the engine's (runtime/admission):
-- true when created; false when the key already names this request (same
-- workflow and fingerprint), in any state; a completed record past
-- retention and tombstone counts as absent and is rewritten. The input is
-- not checked against the workflow's schema here: the worker that takes
-- the run does, and parks the run when it fails.
-- Race closed: two transactions enqueueing one key. ON CONFLICT waits for
-- the other one's commit; the next round reads what it committed.
CREATE OR REPLACE FUNCTION enqueue(
  tenant_id text, key text, workflow text, input jsonb, max_payload_bytes integer DEFAULT 1048576
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_workflow text := $3;
  v_text text;
  v_fingerprint text;
  v_def workflow_versions;
  v_found record;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  v_text := checked_json($4, '$', 'the input', $5);
  PERFORM check_key(v_workflow, 'workflow name');
  SELECT * INTO v_def FROM workflow_versions w WHERE w.workflow = v_workflow ORDER BY w.version DESC LIMIT 1;
  IF NOT FOUND THEN
    PERFORM raise_error('IP009', 'workflow_definition',
                        'workflow ''' || v_workflow || ''' is not registered: enqueue creates runs of the workflows '
                        || 'that a worker (engine.startWorker) running them has registered in this database');
  END IF;
  v_fingerprint := request_fingerprint(v_workflow, v_text);
  FOR round IN 1..8 LOOP
    SELECT r.workflow, r.fingerprint, x.expired, r.outcome, r.completed_at, r.expires_at,
           CASE WHEN x.expired AND x.kept_until > clock_timestamp() THEN x.kept_until END AS tombstone_until
    INTO v_found
    FROM runs r
    CROSS JOIN LATERAL (
      SELECT r.status = 'completed' AND r.expires_at <= clock_timestamp() AS expired,
             r.expires_at + r.tombstone_ms * interval '1 millisecond' AS kept_until
    ) x
    WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
    IF NOT FOUND THEN
      SELECT tb.workflow, encode(tb.fingerprint, 'hex') AS fingerprint, true AS expired, tb.outcome,
             tb.completed_at, tb.expired_at AS expires_at, tb.kept_until AS tombstone_until
      INTO v_found
      FROM tombstones tb
      WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
    END IF;
    IF NOT FOUND THEN
      INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                        input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                        tombstone_ms, wake_at, durable, workflow_version)
      VALUES (v_tenant_id, v_key, new_id(), v_workflow, v_def.definition, v_def.definition_hash, v_fingerprint,
              v_text::json, NULL, 'suspended', NULL, NULL, 0, v_def.retention_ms,
              v_def.tombstone_ms, clock_timestamp(), true, v_def.version)
      ON CONFLICT (tenant_id, key) DO NOTHING;
      IF FOUND THEN
        PERFORM pg_notify('idempo_due', v_workflow);
        RETURN true;
      END IF;
      CONTINUE;
    END IF;
    IF v_found.expired AND v_found.tombstone_until IS NULL THEN
      -- Past retention and tombstone the key counts as absent: the record becomes the new run.
      UPDATE runs
      SET run_id = new_id(), workflow = v_workflow, definition = v_def.definition,
          definition_hash = v_def.definition_hash, workflow_version = v_def.version,
          fingerprint = v_fingerprint, input = v_text::json, parsed_input_hash = NULL,
          status = 'suspended', owner_token = NULL, locked_until = NULL, attempt = 0,
          wake_at = clock_timestamp(), durable = true,
          attempt_floor = 0, outbox_round = 0, trace_parent = NULL, parked_reason = NULL, parked_at = NULL,
          wait_kind = NULL, wait_name = NULL, wait_until = NULL, recovery_point = NULL, state = '{}',
          retention_ms = v_def.retention_ms, tombstone_ms = v_def.tombstone_ms, outcome = NULL,
          response_status = NULL, response_body = NULL, expires_at = NULL, created_at = now(), updated_at = now(),
          completed_at = NULL
      WHERE tenant_id = v_tenant_id AND key = v_key
        AND status = 'completed' AND expires_at + tombstone_ms * interval '1 millisecond' <= clock_timestamp();
      IF FOUND THEN
        DELETE FROM run_history h WHERE h.tenant_id = v_tenant_id AND h.key = v_key;
        DELETE FROM signals s WHERE s.tenant_id = v_tenant_id AND s.key = v_key;
        PERFORM pg_notify('idempo_due', v_workflow);
        RETURN true;
      END IF;
      CONTINUE;
    END IF;
    IF v_found.workflow <> v_workflow THEN
      PERFORM raise_error('IP004', 'key_mismatch',
                          key_name(v_tenant_id, v_key) || ' was first used with workflow ''' || v_found.workflow
                          || ''', not ''' || v_workflow || '''; use a new key for a different request');
    END IF;
    IF v_found.fingerprint <> v_fingerprint THEN
      PERFORM raise_error('IP004', 'key_mismatch',
                          key_name(v_tenant_id, v_key) || ' was first used with a different request payload; '
                          || 'use a new key for a different request');
    END IF;
    IF v_found.tombstone_until IS NOT NULL THEN
      PERFORM raise_error('IP005', 'key_expired',
                          key_name(v_tenant_id, v_key) || ' named a request that completed (' || v_found.outcome
                          || ') at ' || iso_time(v_found.completed_at) || '; its stored response expired at '
                          || iso_time(v_found.expires_at) || ', so it is not run again: use a new key for a new request');
    END IF;
    RETURN false;
  END LOOP;
  PERFORM raise_error('IP006', 'key_in_progress',
                      key_name(v_tenant_id, v_key) || ' is being processed by another attempt; retry in 0 ms');
  RETURN NULL;
END
$$;

-- engine.signal without the schema check (SQL cannot know the wait's
-- schema): keep the signal for the run's `.waitFor(name)` and make the run
-- due when it is suspended there. A run that cannot use a payload discards
-- it (0012), records that in its history and waits for another. The
-- answers and refusals are the engine's (runtime/signal-delivery): a
-- repeat of the delivered signal (name and canonical payload) is a
-- duplicate, on a completed run too; a tombstoned run acknowledges any
-- signal (expired); another payload under a delivered name is key_mismatch.
-- Race closed: the same webhook twice at once, and the lost wake-up. Both
-- the signal and the run's wait lock the run's row first (held until the
-- caller's transaction ends), so the second one sees the first one's write.
CREATE OR REPLACE FUNCTION signal(
  tenant_id text, key text, name text, payload jsonb, max_payload_bytes integer DEFAULT 1048576
) RETURNS TABLE (duplicate boolean, woke boolean, expired boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_name text := $3;
  v_text text;
  v_fingerprint text;
  v_run record;
  v_existing text;
  v_waits text;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  PERFORM check_key(v_name, 'signal name');
  v_text := checked_json($4, 'payload', 'the payload of signal ''' || v_name || '''', $5);
  v_fingerprint := request_fingerprint('signal:' || v_name, v_text);
  SELECT r.run_id, r.workflow, r.status, r.definition,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()
          AND NOT r.expires_at + r.tombstone_ms * interval '1 millisecond' <= clock_timestamp()) AS tombstoned
  INTO v_run
  FROM runs r WHERE r.tenant_id = v_tenant_id AND r.key = v_key
  FOR UPDATE;
  IF NOT FOUND THEN
    PERFORM 1 FROM tombstones tb
    WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
    IF FOUND THEN
      RETURN QUERY SELECT false, false, true;
      RETURN;
    END IF;
    PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
  END IF;
  IF v_run.tombstoned THEN
    -- The run ended and only its tombstone counts: acknowledged, nothing changes.
    RETURN QUERY SELECT false, false, true;
    RETURN;
  END IF;
  IF v_run.expired THEN
    PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
  END IF;
  IF NOT (v_run.definition::jsonb ? ('wait:' || v_name)) THEN
    SELECT string_agg(substr(e.item, 6), ', ' ORDER BY e.n) INTO v_waits
    FROM json_array_elements_text(v_run.definition) WITH ORDINALITY AS e (item, n)
    WHERE e.item LIKE 'wait:%';
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: name: workflow ''' || v_run.workflow || ''' waits for no signal ''' || v_name
                        || ''' (it waits for: ' || coalesce(v_waits, 'none') || ')');
  END IF;
  SELECT s.fingerprint INTO v_existing
  FROM signals s
  WHERE s.tenant_id = v_tenant_id AND s.key = v_key AND s.run_id = v_run.run_id AND s.name = v_name;
  IF FOUND THEN
    IF v_existing = 'timed_out' THEN
      PERFORM raise_error('IP008', 'run_state',
                          key_name(v_tenant_id, v_key) || ': timed out waiting for signal ''' || v_name
                          || ''' before it arrived; the run went on without it (onTimeout or a stored 408), '
                          || 'so the signal changes nothing');
    END IF;
    IF v_existing = v_fingerprint THEN
      RETURN QUERY SELECT true, false, false;
      RETURN;
    END IF;
    PERFORM raise_error('IP004', 'key_mismatch',
                        key_name(v_tenant_id, v_key) || ' was first used with a different payload for signal '''
                        || v_name || '''; use a new key for a different request');
  END IF;
  IF v_run.status = 'completed' THEN
    PERFORM raise_error('IP008', 'run_state',
                        key_name(v_tenant_id, v_key) || ': is completed: signal ''' || v_name
                        || ''' arrived after the run finished and changes nothing (its stored response is replayed)');
  END IF;
  INSERT INTO signals (tenant_id, key, run_id, name, payload, fingerprint)
  VALUES (v_tenant_id, v_key, v_run.run_id, v_name, v_text::json, v_fingerprint);
  UPDATE runs
  SET wake_at = LEAST(coalesce(wake_at, clock_timestamp()), clock_timestamp()), updated_at = clock_timestamp()
  WHERE tenant_id = v_tenant_id AND key = v_key AND run_id = v_run.run_id
    AND status = 'suspended' AND wait_kind = 'signal' AND wait_name = v_name;
  IF FOUND THEN
    PERFORM pg_notify('idempo_due', v_run.workflow);
    RETURN QUERY SELECT false, true, false;
  ELSE
    RETURN QUERY SELECT false, false, false;
  END IF;
END
$$;

-- engine.inspect: the key's record with its history, oldest entry first;
-- the tombstone (status 'expired') when only that is left; no row when
-- the key is absent. A completed record past retention is shown as it is
-- (expired true) until the sweeper turns it into its tombstone.
CREATE OR REPLACE FUNCTION inspect(tenant_id text, key text) RETURNS SETOF run_record
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  RETURN QUERY
  SELECT r.tenant_id, r.key, r.run_id, r.workflow, r.workflow_version, r.status,
         CASE WHEN r.status = 'completed' THEN r.outcome END,
         CASE WHEN r.status = 'completed' THEN r.response_status END,
         CASE WHEN r.status = 'completed' THEN r.response_body END,
         r.parked_reason,
         CASE WHEN r.status = 'suspended' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_kind END,
         CASE WHEN r.status = 'suspended' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_name END,
         CASE WHEN r.status = 'suspended' THEN r.wake_at END,
         r.recovery_point, r.attempt,
         CASE WHEN r.status = 'in_flight'
              THEN ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000)::float8 END,
         r.input, r.state, r.created_at, r.updated_at, r.completed_at, r.expires_at,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()),
         CASE WHEN r.status = 'completed' AND r.tombstone_ms > 0
              THEN r.expires_at + r.tombstone_ms * interval '1 millisecond' END,
         coalesce((
           SELECT json_agg(json_build_object('kind', h.kind, 'name', h.name, 'attempt', h.attempt,
                                             'derived_key', h.derived_key, 'outcome', h.outcome, 'error', h.error,
                                             'started_at', h.started_at, 'finished_at', h.finished_at,
                                             'tries', h.tries)
                           ORDER BY h.started_at, h.entry_id)
           FROM run_history h
           WHERE h.tenant_id = r.tenant_id AND h.key = r.key AND h.run_id = r.run_id
         ), '[]'::json)
  FROM runs r
  WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
  IF FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT tb.tenant_id, v_key, NULL::text, tb.workflow, NULL::integer, 'expired'::text, tb.outcome,
         NULL::integer, NULL::json, NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::text, NULL::integer,
         NULL::float8, NULL::json, NULL::json, NULL::timestamptz, NULL::timestamptz, tb.completed_at, tb.expired_at,
         true, tb.kept_until, NULL::json
  FROM tombstones tb
  WHERE tb.tenant_id = v_tenant_id AND tb.key_digest = key_digest(v_key) AND tb.kept_until > clock_timestamp();
END
$$;

-- engine.cancel (0017, 0024, 0025): finish a run that is in flight,
-- suspended or parked with a stored answer (outcome 'canceled'; default 409
-- with the problem body the engine stores, code run_canceled), through
-- mark_completed as every completion, and cancel its children that have
-- not completed, and theirs in turn (cancel_children, with the answer
-- engine.cancel gives them); a live owner's next write fails. The children
-- are canceled first, in one transaction with the parent: a child's
-- completion locks its own row, then its parent's, and this takes them in
-- the same order. Then the parent, whose row lock waits for a child start
-- in progress (it holds the parent's row from its first statement); the
-- children that start committed are canceled next, and no later start
-- finds the parent in flight. A deadlock with a completing child runs the
-- whole cancel again (up to 5 times), as engine.cancel does. Returns the
-- record as inspect shows it. run_state (IP008) for a completed run,
-- run_not_found (IP007) for an absent key; either leaves every child as it was.
CREATE OR REPLACE FUNCTION cancel(
  tenant_id text, key text, status integer DEFAULT 409, body jsonb DEFAULT NULL,
  max_payload_bytes integer DEFAULT 1048576
) RETURNS SETOF run_record LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_key text := $2;
  v_status integer := $3;
  v_text text;
  v_found record;
  v_run_id text;
  v_try integer;
  v_done boolean := false;
  v_child_body json := '{"type":"about:blank","title":"Canceled","status":409,"code":"run_canceled","detail":"the parent run ended before this child completed"}';
BEGIN
  PERFORM check_run_key(v_tenant_id, v_key);
  IF v_status IS NULL OR v_status < 100 OR v_status > 599 THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: status: must be an integer 100-599, got ' || coalesce(v_status::text, 'null'));
  END IF;
  v_text := checked_json(coalesce($4, jsonb_build_object(
              'type', 'about:blank', 'title', 'Canceled', 'status', v_status, 'code', 'run_canceled',
              'detail', 'an operator canceled this request; retrying with the same key returns this answer')),
            'body', 'the body of cancel', $5);
  SELECT r.run_id INTO v_run_id FROM runs r
  WHERE r.tenant_id = v_tenant_id AND r.key = v_key AND r.status <> 'completed';
  IF FOUND THEN
    -- A deadlock with a completing child (its row, then its parent's and a
    -- queued sibling's) rolls back only this block, which runs again after
    -- a short pause: at once, it could take the rows back before the other
    -- side, woken by the rollback, gets them, and meet it again.
    FOR v_try IN 1..5 LOOP
      BEGIN
        v_done := false;
        PERFORM cancel_children(v_tenant_id, v_key, v_run_id, 'canceled', 409, v_child_body);
        PERFORM 1 FROM mark_completed(v_tenant_id, v_key, NULL, true, 'canceled', v_status, v_text::json,
                                      NULL, NULL, false);
        v_done := FOUND;
        IF v_done THEN
          -- Children a start committed while this waited for the parent's row.
          PERFORM cancel_children(v_tenant_id, v_key, v_run_id, 'canceled', 409, v_child_body);
        END IF;
        EXIT;
      EXCEPTION WHEN deadlock_detected OR serialization_failure THEN
        IF v_try = 5 THEN
          RAISE;
        END IF;
        PERFORM pg_sleep(0.02 * v_try);
      END;
    END LOOP;
  END IF;
  IF NOT v_done THEN
    SELECT r.status, r.outcome INTO v_found FROM runs r WHERE r.tenant_id = v_tenant_id AND r.key = v_key;
    IF NOT FOUND THEN
      PERFORM raise_error('IP007', 'run_not_found', 'no record for ' || key_name(v_tenant_id, v_key));
    END IF;
    PERFORM raise_error('IP008', 'run_state',
                        key_name(v_tenant_id, v_key) || ': is already completed (outcome '
                        || coalesce(v_found.outcome, 'unknown')
                        || '): there is nothing to cancel, its stored response is replayed');
  END IF;
  RETURN QUERY SELECT * FROM inspect(v_tenant_id, v_key);
END
$$;

-- engine.listKeys: one page of records, newest first, each with the cursor
-- that continues after it (the cursors of listKeys, in either direction).
-- stuck: in flight with an expired lease (compared with now(), so that
-- runs_in_flight_locked_until serves it); status 'parked' reads runs_parked.
CREATE OR REPLACE FUNCTION list_runs(
  tenant_id text DEFAULT NULL, workflow text DEFAULT NULL, status text DEFAULT NULL, stuck boolean DEFAULT false,
  page_size integer DEFAULT 50, cursor text DEFAULT NULL
) RETURNS SETOF run_summary LANGUAGE plpgsql STABLE SET search_path FROM CURRENT SET datestyle = 'ISO, MDY' AS $$
#variable_conflict use_column
DECLARE
  v_tenant_id text := $1;
  v_workflow text := $2;
  v_status text := $3;
  v_stuck boolean := coalesce($4, false);
  v_limit integer := $5;
  v_after jsonb;
BEGIN
  IF v_tenant_id IS NOT NULL THEN
    PERFORM check_key(v_tenant_id, 'tenant id');
  END IF;
  IF v_workflow IS NOT NULL THEN
    PERFORM check_key(v_workflow, 'workflow name');
  END IF;
  IF v_status IS NOT NULL AND v_status NOT IN ('in_flight', 'completed', 'parked', 'suspended') THEN
    PERFORM raise_error('IP002', 'invalid_input',
                        'invalid input: status: must be ''in_flight'', ''completed'', ''parked'' or ''suspended''');
  END IF;
  IF v_limit IS NULL OR v_limit < 1 OR v_limit > 1000 THEN
    PERFORM raise_error('IP002', 'invalid_input', 'invalid input: page_size: must be an integer from 1 to 1000');
  END IF;
  IF $6 IS NOT NULL THEN
    BEGIN
      v_after := convert_from(decode(translate($6, '-_', '+/') || repeat('=', (4 - length($6) % 4) % 4), 'base64'),
                              'UTF8')::jsonb;
    EXCEPTION WHEN OTHERS THEN
      v_after := NULL;
    END;
    IF v_after IS NULL OR jsonb_typeof(v_after) <> 'array' OR jsonb_array_length(v_after) <> 3
       OR jsonb_typeof(v_after -> 0) <> 'string' OR jsonb_typeof(v_after -> 1) <> 'string'
       OR jsonb_typeof(v_after -> 2) <> 'string'
       OR (v_after ->> 0) !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?[+-][0-9]{2}(:[0-9]{2}){0,2}$' THEN
      PERFORM raise_error('IP002', 'invalid_input', 'invalid input: cursor: not a cursor returned by list_runs or listKeys');
    END IF;
  END IF;
  -- Only the filters given, as the engine's listKeys writes them: each plan sees its own conditions.
  RETURN QUERY EXECUTE
  'SELECT r.tenant_id, r.key, r.workflow, r.workflow_version, r.status, r.parked_reason,
          CASE WHEN r.status = ''suspended'' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_kind END,
          CASE WHEN r.status = ''suspended'' AND r.wait_kind IS NOT NULL AND r.wait_name IS NOT NULL THEN r.wait_name END,
          CASE WHEN r.status = ''suspended'' THEN r.wake_at END,
          r.recovery_point, r.attempt,
          CASE WHEN r.status = ''in_flight''
               THEN ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000)::float8 END,
          CASE WHEN r.status = ''completed'' THEN r.outcome END,
          CASE WHEN r.status = ''completed'' THEN r.response_status END,
          r.created_at, r.updated_at,
          rtrim(translate(encode(convert_to(canonical_json_at(jsonb_build_array(r.created_at::text, r.tenant_id, r.key), 0),
                                            ''UTF8''), ''base64''), E''+/\n'', ''-_''), ''='')
   FROM runs r WHERE true'
  || CASE WHEN v_tenant_id IS NULL THEN '' ELSE ' AND r.tenant_id = $1' END
  || CASE WHEN v_workflow IS NULL THEN '' ELSE ' AND r.workflow = $2' END
  || CASE WHEN v_status IS NULL THEN '' ELSE ' AND r.status = $3' END
  -- now(), not clock_timestamp(): an index condition on runs_in_flight_locked_until.
  || CASE WHEN v_stuck THEN ' AND r.status = ''in_flight'' AND r.locked_until <= now()' ELSE '' END
  || CASE WHEN v_after IS NULL THEN ''
          ELSE ' AND (r.created_at, r.tenant_id, r.key) < (($4 ->> 0)::timestamptz, $4 ->> 1, $4 ->> 2)' END
  || ' ORDER BY r.created_at DESC, r.tenant_id DESC, r.key DESC LIMIT $5'
  USING v_tenant_id, v_workflow, v_status, v_after, v_limit;
END
$$;

-- ---------------------------------------------------------------------------
-- Child runs (0020)
-- ---------------------------------------------------------------------------

-- A child just completed (0020, 0024). The parent's row is locked first: a
-- parent that suspends locks its own row before it reads its children, so
-- the two serialise and the one that goes second sees the other (the lost
-- wake-up: a last child completing while its parent decides to wait).
-- Under that lock the next queued sibling becomes due when the child held
-- a runnable place (it was not queued itself: a queued child an operator
-- canceled frees none), so at most `concurrency` children are runnable at
-- once; and when no sibling is left uncompleted, the parent waiting on the
-- item becomes due.
CREATE OR REPLACE FUNCTION child_completed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_parent runs;
BEGIN
  SELECT * INTO v_parent FROM runs
  WHERE tenant_id = NEW.tenant_id AND key = NEW.parent_key AND run_id = NEW.parent_run_id
  FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF NOT (OLD.status = 'suspended' AND OLD.wait_kind IS NOT DISTINCT FROM 'queued') THEN
    UPDATE runs SET wait_kind = NULL, wait_name = NULL, wake_at = clock_timestamp(), updated_at = clock_timestamp()
    WHERE (tenant_id, key) = (
      SELECT tenant_id, key FROM runs
      WHERE tenant_id = NEW.tenant_id AND parent_key = NEW.parent_key AND parent_item = NEW.parent_item
        AND parent_run_id = NEW.parent_run_id AND status = 'suspended' AND wait_kind = 'queued'
      ORDER BY child_index
      LIMIT 1
    );
    IF FOUND THEN
      PERFORM pg_notify('idempo_due', NEW.workflow);
    END IF;
  END IF;
  IF v_parent.status = 'suspended' AND v_parent.wait_kind = 'children' AND v_parent.wait_name = NEW.parent_item
     AND NOT EXISTS (
       SELECT 1 FROM runs
       WHERE tenant_id = NEW.tenant_id AND parent_key = NEW.parent_key AND parent_item = NEW.parent_item
         AND parent_run_id = NEW.parent_run_id AND status <> 'completed'
     ) THEN
    UPDATE runs SET wake_at = clock_timestamp(), updated_at = clock_timestamp()
    WHERE tenant_id = NEW.tenant_id AND key = NEW.parent_key;
    PERFORM pg_notify('idempo_due', v_parent.workflow);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER runs_child_completed AFTER UPDATE OF status ON runs
FOR EACH ROW WHEN (NEW.parent_key IS NOT NULL AND NEW.status = 'completed' AND OLD.status <> 'completed')
EXECUTE FUNCTION child_completed();

-- Cancel the children of the parent (p_tenant_id, p_key, p_run_id) that
-- have not completed (of every item, and their own children, at any depth)
-- with the given answer (outcome 'canceled'), as mark_completed writes an
-- operator's cancel, in one UPDATE over all of them: every child row is
-- locked (in key order) before any completion trigger locks its parent's.
-- In flight ones lose their owner: their next write is refused. Returns how
-- many were canceled. engine.cancel (store/child-cancel.ts) calls it after
-- the parent's cancel committed, cancel() below before the parent's.
CREATE OR REPLACE FUNCTION cancel_children(
  p_tenant_id text, p_key text, p_run_id text,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS integer LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_n integer;
  v_told integer;
BEGIN
  WITH RECURSIVE tree AS (
    SELECT tenant_id, key, run_id FROM runs
    WHERE tenant_id = p_tenant_id AND parent_key = p_key AND parent_run_id = p_run_id
    UNION
    SELECT c.tenant_id, c.key, c.run_id FROM runs c
    JOIN tree ON c.tenant_id = tree.tenant_id AND c.parent_key = tree.key AND c.parent_run_id = tree.run_id
  ), doomed AS (
    SELECT r.tenant_id, r.key FROM runs r JOIN tree USING (tenant_id, key)
    WHERE r.status <> 'completed'
    ORDER BY r.key FOR UPDATE OF r
  ), canceled AS (
    UPDATE runs r
    SET status = 'completed', owner_token = NULL, locked_until = NULL, parked_reason = NULL, parked_at = NULL,
        outcome = p_outcome, response_status = p_response_status, response_body = p_response_body,
        expires_at = clock_timestamp() + r.retention_ms * interval '1 millisecond',
        completed_at = clock_timestamp(), updated_at = clock_timestamp()
    FROM doomed d
    WHERE r.tenant_id = d.tenant_id AND r.key = d.key AND r.status <> 'completed'
    RETURNING r.tenant_id, r.key, r.durable
  ), told AS (
    SELECT pg_notify('idempo_done', completion_tag(tenant_id, key)) FROM canceled WHERE durable
  )
  SELECT (SELECT count(*) FROM canceled)::int, (SELECT count(*) FROM told)::int INTO v_n, v_told;
  RETURN v_n;
END
$$;
