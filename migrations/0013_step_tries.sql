-- Why: a step retried in process (its `retries`) left one history entry per
-- attempt, so the calls that failed before the last one, their errors and
-- their durations, were lost. The entry now keeps every call of the step in
-- that attempt, as a JSON array of { error, durationMs }, oldest first. It is
-- written by the write the step makes anyway (its result, or its failure),
-- so a step that succeeds at its first try costs nothing more: it stores
-- NULL, its one call being the entry itself.
-- The result's statement function takes the tries as a twelfth argument.
-- The eleven-argument form of 0008 stays, unchanged, for processes still on
-- the release before this one during a rolling deploy; it writes no tries.
-- The function ends with `$$;` on its own line (the runner splits there).

-- Every call of the step in this attempt; NULL for a single call, phases, sleeps and waits.
ALTER TABLE run_history ADD COLUMN tries json;

-- A step's result: the recovery point moves past it, the state (and, for the
-- run's last item, the response, announced when the run is durable) is
-- stored, then its history entry is closed with its tries.
CREATE OR REPLACE FUNCTION record_step_result(
  p_tenant_id text, p_key text, p_owner_token text, p_entry_id text, p_step_outcome text, p_name text,
  p_state json, p_lease_ms float8,
  p_outcome text, p_response_status integer, p_response_body json, p_tries json
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
  UPDATE run_history SET outcome = p_step_outcome, finished_at = clock_timestamp(), tries = p_tries
  WHERE tenant_id = p_tenant_id AND key = p_key AND entry_id = p_entry_id;
  IF v_durable THEN
    PERFORM pg_notify('idempo_done', md5(p_tenant_id || chr(31) || p_key));
  END IF;
  RETURN true;
END
$$;
