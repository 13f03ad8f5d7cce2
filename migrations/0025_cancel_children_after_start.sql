-- Why: the SQL interface's cancel() canceled the parent's children it
-- read, then the parent: a child start (a `.child` or `.map` item) that
-- held the parent's row lock meanwhile committed its children after that
-- read, the parent's cancel then went through, and the new children stayed
-- due, runnable, until the sweeper found them orphaned. Now cancel()
-- cancels the children once more after the parent's own write, which
-- waited for that start to commit: its children are seen and canceled in
-- the same transaction, and a later start finds the parent completed and
-- writes nothing.
--
-- advance_run's completing branch read the run once more before
-- mark_completed to ask slot_commit_allowed, on every completion, with or
-- without `.concurrency`; since 0024 mark_completed asks it itself in its
-- UPDATE, only for a run under a limit, so the extra read is gone and a
-- completion reads the row once. No table changes.
-- Each function ends with `$$;` on its own line (the runner splits there).

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
