-- Why: the key record (one row per tenant and idempotency key) and the history of
-- each run's phases and steps. Every table and index leads with tenant_id so the
-- schema can be distributed by tenant (Citus) without change.
-- Applied by the migration runner with search_path set to the configured schema.

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
  status           text        NOT NULL CHECK (status IN ('in_flight', 'completed')),
  -- Minted on every claim and takeover; every write of the run is fenced on it.
  owner_token      text,
  -- The lease, always computed on the database clock.
  locked_until     timestamptz,
  attempt          integer     NOT NULL DEFAULT 1,
  recovery_point   text,
  state            json        NOT NULL DEFAULT '{}',
  retention_ms     bigint      NOT NULL,
  -- 'succeeded' (respond), 'failed' (ctx.fail) or 'errored' (stored unknown error).
  outcome          text        CHECK (outcome IN ('succeeded', 'failed', 'errored')),
  response_status  integer,
  response_body    json,
  expires_at       timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  PRIMARY KEY (tenant_id, key),
  CHECK (status = 'in_flight' OR (owner_token IS NULL AND response_status IS NOT NULL AND expires_at IS NOT NULL))
);

-- Stuck-run discovery (resumeStale, listKeys stuck) scans only in-flight rows.
CREATE INDEX runs_in_flight_lease ON runs (tenant_id, locked_until) WHERE status = 'in_flight';
-- The sweeper scans only completed rows by expiry.
CREATE INDEX runs_completed_expiry ON runs (tenant_id, expires_at) WHERE status = 'completed';
-- Operator listings, newest first.
CREATE INDEX runs_created ON runs (tenant_id, created_at);

CREATE TABLE run_history (
  tenant_id    text        NOT NULL,
  key          text        NOT NULL,
  run_id       text        NOT NULL,
  entry_id     text        NOT NULL,
  kind         text        NOT NULL CHECK (kind IN ('phase', 'step')),
  name         text        NOT NULL,
  attempt      integer     NOT NULL,
  derived_key  text,
  -- started: a step call may be under way or in doubt; interrupted: a later
  -- attempt found it started and took the step over; the rest are final.
  outcome      text        NOT NULL CHECK (outcome IN ('started', 'interrupted', 'succeeded', 'failed', 'reconciled')),
  error        text,
  started_at   timestamptz NOT NULL,
  finished_at  timestamptz,
  PRIMARY KEY (tenant_id, key, entry_id)
);
