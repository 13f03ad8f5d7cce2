-- Why: 0022 fenced advance_run by the slot of a run under `.concurrency`,
-- but a parallel branch's record (record_branch_result) still re-armed the
-- lease fenced by the owner token alone, and so did the move past a
-- `.child`, `.map` or `.waitFor` item (store/progress.ts), and an owner's
-- completion through mark_completed (a completion without a new recovery
-- point, a wait's timeout, the last item past a wait) asked only for the
-- token: a holder paused past its lease, whose slot another attempt took,
-- recorded its branch, was live again beside the new holder (one more
-- holder than `max`) and committed on. Now each of them asks
-- slot_commit_allowed too (the store's own statements, and a sleep's or a
-- suspension on new children, through store/progress.ts slotFence), and a
-- refusal is a fenced write: nothing is written, the attempt stops with
-- LeaseLostError.
--
-- A child's completion made the next queued sibling of its `.map` due
-- even when the completed child was itself only queued (an operator
-- canceled it): each such cancel made one more child runnable than the
-- map's `concurrency`. Now a completion frees a place only if the child
-- held one (it was not queued).
--
-- The SQL interface's cancel() completed the parent only, while
-- engine.cancel also cancels its children that have not completed, and
-- theirs in turn. The cascade is now one function, cancel_children, that
-- both call. No table changes.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- A branch's result (0019): its entry closed with the result and its tries,
-- while the attempt owns the key and, for a run under a concurrency limit,
-- its slot (slot_commit_allowed, 0022). The lease is extended by the same
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

-- A child just completed (0020). The parent's row is locked first: a
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

-- engine.cancel: finish a run that is in flight, suspended or parked with a
-- stored answer (outcome 'canceled'; default 409 with the problem body the
-- engine stores, code run_canceled), through mark_completed as every
-- completion, and cancel its children that have not completed, and theirs
-- in turn (cancel_children, with the answer engine.cancel gives them); a
-- live owner's next write fails. The children are canceled first, in one
-- transaction with the parent: a child's completion locks its own row,
-- then its parent's, and this takes them in the same order; a deadlock
-- with a completing child's lock of a queued sibling runs the children's
-- cancel again (up to 5 times), as engine.cancel does. Returns the
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
        PERFORM cancel_children(v_tenant_id, v_key, v_run_id, 'canceled', 409,
          '{"type":"about:blank","title":"Canceled","status":409,"code":"run_canceled","detail":"the parent run ended before this child completed"}'::json);
        EXIT;
      EXCEPTION WHEN deadlock_detected OR serialization_failure THEN
        IF v_try = 5 THEN
          RAISE;
        END IF;
        PERFORM pg_sleep(0.02 * v_try);
      END;
    END LOOP;
  END IF;
  PERFORM 1 FROM mark_completed(v_tenant_id, v_key, NULL, true, 'canceled', v_status, v_text::json, NULL, NULL, false);
  IF NOT FOUND THEN
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
