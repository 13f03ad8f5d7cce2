-- Why: a `.parallel` item calls several steps (its branches) at once, and a
-- crash after some of them returned must call only the others again. A
-- branch is one history entry per call, like a step's, with the branch's
-- name beside the item's; its result is kept on that entry from the moment
-- it returns until the item commits (the results then move into the run's
-- state in the same statement) or a retryFrom rewinds the run (every branch
-- runs again). The item commits with an entry of its own, of kind
-- 'parallel'. New columns and functions only: the release before this one
-- keeps working during a rolling deploy (it has no parallel items).
-- Each function ends with `$$;` on its own line (the runner splits there).

-- The branch of a 'branch' entry (its item is the entry's name); NULL for every other kind.
ALTER TABLE run_history ADD COLUMN branch text;
-- A branch's result as JSON text, from its return until its item commits or the run is rewound.
ALTER TABLE run_history ADD COLUMN result json;

ALTER TABLE run_history DROP CONSTRAINT run_history_kind_check;
ALTER TABLE run_history ADD CONSTRAINT run_history_kind_check
  CHECK (kind IN ('phase', 'step', 'sleep', 'wait', 'parallel', 'branch'));

-- A branch about to be called, as record_step_started is for a step: earlier
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

-- A branch's result: its entry closed with the result and its tries, while
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

-- A parallel item done: the run advanced past it (or completed) with the
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
