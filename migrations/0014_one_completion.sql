-- Why: the statement that completes a run (store the response, drop owner
-- and lease, start retention, announce a durable run) was written out five
-- times: in commit_phase, both forms of record_step_result and complete_run
-- here, in the wait's result and in the operator's cancel. It is now written
-- once, as mark_completed, and each of them calls it; the functions below are
-- restated whole (the eleven-argument record_step_result now calls the
-- twelve-argument one with no tries, which writes the same). The completion
-- notification's tag is one function too, completion_tag, which
-- store/notify-channels.ts computes the same way (a test compares them).
-- The commit's write of the run that commit_phase and record_step_result
-- share (advance the recovery point and extend the lease, or complete) is
-- one function too, advance_run; a completing commit still makes one UPDATE
-- of the run: mark_completed also moves the recovery point and stores the
-- state when it is given them.
-- Same arguments and results as before, so processes of the previous
-- release keep working while a deploy rolls out.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The tag a completion notification carries: MD5 hex of tenant, U+001F and key.
CREATE OR REPLACE FUNCTION completion_tag(p_tenant_id text, p_key text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT md5(p_tenant_id || chr(31) || p_key)
$$;

-- Complete a run: store the response, drop owner and lease, start retention,
-- and announce the completion on idempo_done when the run is durable. With
-- p_recovery_point and p_state (the run's last item), they are stored in the
-- same UPDATE; p_past_wait also forgets the wait the run was at.
-- Fenced on p_owner_token: only the attempt that owns the key completes it,
-- and a zombie gets no row. p_cancel is an operator's cancel instead: any
-- run that is not completed (in flight, parked or suspended), whoever owns
-- it; the owner's next write finds status completed and matches nothing.
-- Returns the completed row, or no row.
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

-- A commit's write of the run: move the recovery point to p_name and store
-- the state, and extend the lease, or, with a response (the run's last
-- item), complete the run in the same UPDATE. Fenced on the owner token in
-- both branches: false when the attempt no longer owns the key.
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

-- A step's result: the run advanced past the step (or completed), then its
-- history entry closed with its tries.
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

-- The same without the tries, as 0008 wrote it (for the previous release).
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
