-- Why: a key that comes back after its retention ran the workflow again as a
-- new run, so a client retry arriving a day late charged the card twice. When
-- a completed record expires, a tombstone now stays for the workflow's
-- tombstoneMs (default 7 days): a request for the key is refused with 410
-- (IdempotencyKeyExpiredError) instead of running again, and a signal for the
-- run is acknowledged. A busy service makes hundreds of millions of keys a
-- week, so a tombstone is one narrow row with no history: the key as a
-- 16-byte digest and the fingerprint as its 32 raw bytes, not as text;
-- docs/retention.md has the measured cost per key.
-- A completed record past retention but not swept yet already answers as its
-- tombstone (runs.tombstone_ms says until when); the sweeper moves it into
-- `tombstones` and deletes tombstones past their time, both in bounded
-- batches read from an index on the time they compare.

-- The tombstone time copied onto each run at its claim, like retention_ms.
-- Records written before this migration get the default: the safe side
-- (a late retry of them is refused, not run again). A constant default adds
-- the column without rewriting the table.
ALTER TABLE runs ADD COLUMN tombstone_ms bigint NOT NULL DEFAULT 604800000;

-- How a tombstone names its key: the first 16 bytes of SHA-256 over the
-- key's UTF-8 (a collision among 10^12 keys of one tenant has a chance
-- under 10^-14, and would refuse a key, never run one twice). Every reader
-- asks by the key itself, so nothing needs the text back. A plain SQL
-- function, inlined by the planner; to find a key by hand:
-- SELECT * FROM idempo.tombstones WHERE tenant_id = 'acme' AND key_digest = idempo.key_digest('order-1');
CREATE OR REPLACE FUNCTION key_digest(p_key text) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT substring(sha256(convert_to(p_key, 'UTF8')) FROM 1 FOR 16)
$$;

-- The fixed-width columns first: they follow the tuple header without
-- padding, and the variable-length ones after them need no alignment.
CREATE TABLE tombstones (
  -- When the run completed and when its record expired (its expires_at).
  completed_at timestamptz NOT NULL,
  expired_at   timestamptz NOT NULL,
  -- expired_at + the run's tombstone_ms: from then on the key is absent.
  kept_until   timestamptz NOT NULL,
  tenant_id    text        NOT NULL,
  key_digest   bytea       NOT NULL,
  workflow     text        NOT NULL,
  outcome      text        NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'errored', 'canceled')),
  -- SHA-256 of workflow name + RFC 8785 canonical input, raw (runs.fingerprint is its hex).
  fingerprint  bytea       NOT NULL,
  PRIMARY KEY (tenant_id, key_digest)
);

-- The sweep of tombstones past their time, oldest first (see 0004: a range
-- compared with now() is an index condition).
CREATE INDEX tombstones_kept_until ON tombstones (kept_until);

-- The claim of 0009 with the run's tombstone time as one more argument and
-- three more result columns. A record found in runs is answered as before;
-- when it is past retention, tombstone_until says until when it still
-- refuses the key (NULL: the key counts as absent). Only a key absent from
-- runs reads `tombstones`, one more primary-key probe on the new-key path;
-- a live tombstone is answered like a completed record (claimed false,
-- status completed, expired true). A tombstone past its time counts as
-- absent and the INSERT goes ahead (the sweeper deletes it later; a later
-- tombstone of the key replaces it).
-- Race: the sweeper deletes an expired record and writes its tombstone in
-- one statement, so each read here sees one or the other: the record before
-- that commit, the tombstone after it.
-- A new overload, not a replacement: processes of the previous release keep
-- calling the 13-argument claim_new_key of 0009 while a deploy rolls out.
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
