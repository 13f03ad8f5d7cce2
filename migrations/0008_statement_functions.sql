-- Why: the engine's hot-path statements (the claim and the replay read, the
-- takeover, the phase commit, a step's start and result, the completion and
-- the lease renewal) must run with cached plans on every driver without any
-- setting on the application's side. A plain pg.Pool sends every query
-- unnamed, so the server parsed and planned these CTEs on every call; PGlite
-- has no named statements at all. PL/pgSQL keeps the plan of each statement
-- of a function per session, so each statement lives here as a function whose
-- body is that statement, and the engine calls it with one short SELECT
-- (docs/benchmarks.md has the measurements). The application's own queries
-- are not touched. Every write keeps its fence (owner token and status) in
-- its WHERE clause, visible below.
-- SET search_path FROM CURRENT pins the configured schema (the runner sets it)
-- for the table names in the bodies, whatever the caller's search_path is.
-- A commit that completes a durable run (enqueued or once suspended, 0006)
-- announces it on the channel idempo_done with the tag md5(tenant_id, U+001F,
-- key), as store/notify-channels.ts names them, for `engine.wait`; a plain
-- request run queues no notification.
-- Each function ends with `$$;` on its own line (the runner splits there). OR REPLACE:
-- applying the file again (by hand, after a partial run) replaces what is there.

-- The claim: a new key is inserted, or the existing record is read (the replay
-- read, a 409, a mismatch), in one statement. ON CONFLICT DO NOTHING: a replay
-- of a completed key takes no row lock and writes nothing. A suspended run
-- reports the ms until its wake-up time (0 or less when due, NULL while it
-- waits for a signal without timeout).
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
  RETURN QUERY
  WITH inserted AS (
    INSERT INTO runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                      input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                      workflow_version)
    VALUES (p_tenant_id, p_key, p_run_id, p_workflow, p_definition,
            p_definition_hash, p_fingerprint, p_input, p_parsed_input_hash, 'in_flight',
            p_owner_token,
            clock_timestamp() + p_lease_ms * interval '1 millisecond', 1, p_retention_ms, p_workflow_version)
    ON CONFLICT (tenant_id, key) DO NOTHING
    RETURNING 1
  )
  SELECT EXISTS (SELECT 1 FROM inserted) AS claimed,
         r.workflow, r.fingerprint, r.status,
         GREATEST(0, ceil(extract(epoch FROM (r.locked_until - clock_timestamp())) * 1000))::float8 AS lease_remaining_ms,
         (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired,
         r.outcome, r.parked_reason, r.response_status, r.response_body::text AS response_body,
         CASE WHEN r.status = 'suspended'
              THEN ceil(extract(epoch FROM (r.wake_at - clock_timestamp())) * 1000)::float8 END AS wake_remaining_ms
  FROM (VALUES (1)) AS one (x)
  LEFT JOIN runs r ON r.tenant_id = p_tenant_id AND r.key = p_key;
END
$$;

-- The takeover of an in-flight run whose lease expired: a new owner token, a
-- new lease and one more attempt, or the run parked when its attempts ran out.
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

-- A phase commit: the recovery point, the state, and the lease extended (or
-- the response stored when the phase is the run's last item, announced when
-- the run is durable), then the phase's history entry. Fenced: a zombie
-- attempt matches nothing and gets false.
CREATE OR REPLACE FUNCTION commit_phase(
  p_tenant_id text, p_key text, p_owner_token text, p_run_id text, p_entry_id text, p_name text,
  p_attempt integer, p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_durable boolean; -- set when this commit completes the run
BEGIN
  IF p_response_status IS NULL THEN
    UPDATE runs
    SET recovery_point = p_name, state = p_state, updated_at = clock_timestamp(),
        locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND owner_token = p_owner_token AND status = 'in_flight';
  ELSE
    UPDATE runs
    SET recovery_point = p_name, state = p_state, updated_at = clock_timestamp(),
        status = 'completed', owner_token = NULL, locked_until = NULL,
        outcome = p_outcome, response_status = p_response_status, response_body = p_response_body,
        expires_at = clock_timestamp() + retention_ms * interval '1 millisecond', completed_at = clock_timestamp()
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND owner_token = p_owner_token AND status = 'in_flight'
    RETURNING durable INTO v_durable;
  END IF;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO run_history (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at, finished_at)
  VALUES (p_tenant_id, p_key, p_run_id, p_entry_id, 'phase', p_name, p_attempt, 'succeeded', now(), clock_timestamp());
  IF v_durable THEN
    PERFORM pg_notify('idempo_done', md5(p_tenant_id || chr(31) || p_key));
  END IF;
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

-- A step's result: the recovery point moves past it, the state (and, for the
-- run's last item, the response, announced when the run is durable) is
-- stored, then its history entry is closed.
CREATE OR REPLACE FUNCTION record_step_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_step_outcome text, p_name text,
  p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_durable boolean; -- set when this commit completes the run
BEGIN
  IF p_response_status IS NULL THEN
    UPDATE runs
    SET recovery_point = p_name, state = p_state, updated_at = clock_timestamp(),
        locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND owner_token = p_owner_token AND status = 'in_flight';
  ELSE
    UPDATE runs
    SET recovery_point = p_name, state = p_state, updated_at = clock_timestamp(),
        status = 'completed', owner_token = NULL, locked_until = NULL,
        outcome = p_outcome, response_status = p_response_status, response_body = p_response_body,
        expires_at = clock_timestamp() + retention_ms * interval '1 millisecond', completed_at = clock_timestamp()
    WHERE tenant_id = p_tenant_id AND key = p_key
      AND owner_token = p_owner_token AND status = 'in_flight'
    RETURNING durable INTO v_durable;
  END IF;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE run_history SET outcome = p_step_outcome, finished_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key AND entry_id = p_entry_id;
  IF v_durable THEN
    PERFORM pg_notify('idempo_done', md5(p_tenant_id || chr(31) || p_key));
  END IF;
  RETURN true;
END
$$;

-- A completion without a new recovery point (ctx.fail, a stored unknown error,
-- a wait's timeout, nothing after the last recovery point), announced when the
-- run is durable.
CREATE OR REPLACE FUNCTION complete_run(
  p_tenant_id text, p_key text, p_owner_token text,
  p_outcome text, p_response_status integer, p_response_body json
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  v_durable boolean;
BEGIN
  UPDATE runs
  SET updated_at = clock_timestamp(),
      status = 'completed', owner_token = NULL, locked_until = NULL,
      outcome = p_outcome, response_status = p_response_status, response_body = p_response_body,
      expires_at = clock_timestamp() + retention_ms * interval '1 millisecond', completed_at = clock_timestamp()
  WHERE tenant_id = p_tenant_id AND key = p_key
    AND owner_token = p_owner_token AND status = 'in_flight'
  RETURNING durable INTO v_durable;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF v_durable THEN
    PERFORM pg_notify('idempo_done', md5(p_tenant_id || chr(31) || p_key));
  END IF;
  RETURN true;
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
