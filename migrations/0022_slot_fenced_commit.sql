-- Why: a run under `.concurrency` holds its slot while it is in flight
-- under a live lease, and its heartbeat (renew_slot_lease) renews the lease
-- only while the slot still names it. Its commits did not ask: advance_run
-- re-armed the lease fenced by the owner token alone. A holder paused past
-- its lease, whose slot another attempt took meanwhile, could commit its
-- next phase or step result, and be live again beside the new holder (one
-- more holder than `max`) until its next heartbeat failed. The protocol
-- model found it (packages/model, slots scenario).
--
-- Now a commit of a run admitted under a limit locks the slot row that
-- names its attempt (FOR KEY SHARE, as the heartbeat does: a taker's FOR
-- UPDATE SKIP LOCKED then passes it by, and a taker that locked it first
-- has renamed it by the time this lock is granted), and goes ahead while
-- the slot is its own, or, with no slot naming it, only while its lease is
-- live. A slot is only ever taken from a holder whose lease ended, so an
-- attempt with a live lease and no slot never had one (a run admitted under
-- a limit that a later version dropped). A refused commit is a fenced one:
-- the attempt stops as when its lease was lost, and a takeover carries on.
--
-- Runs of workflows without a limit (concurrency_key NULL) pass the new
-- condition without calling the function; a completing commit reads the
-- run's limit once more first. No table changes.
-- Each function ends with `$$;` on its own line (the runner splits there).

-- True when the attempt may commit under its run's concurrency limit
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

-- A commit's write of the run: as in 0014, and for a run under a limit only
-- while slot_commit_allowed says so. Fenced in both branches: false when the
-- attempt no longer owns the key or lost its slot.
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
    IF EXISTS (
      SELECT 1 FROM runs
      WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
        AND concurrency_key IS NOT NULL
        AND NOT slot_commit_allowed(tenant_id, key, owner_token, concurrency_key, locked_until)
    ) THEN
      RETURN false;
    END IF;
    PERFORM 1 FROM mark_completed(p_tenant_id, p_key, p_owner_token, false,
                                  p_outcome, p_response_status, p_response_body, p_name, p_state, false);
  END IF;
  RETURN FOUND;
END
$$;
