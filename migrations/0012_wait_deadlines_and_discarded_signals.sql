-- Why: a stored signal must never park a run. A signal stored unchecked
-- (written to the table directly, or by an older release) whose payload fails
-- the wait's schema is discarded by the run, which records that in its
-- history and keeps waiting. Waiting on needs the wait's deadline, and
-- wake_at cannot always hold it: a signal moves wake_at to now to make the
-- run due. The deadline gets its own column, kept while a signal wakes the
-- run and across takeovers; retryFrom clears it, so a rewound wait is re-armed.

-- The deadline of the `.waitFor` the run waits at (DB clock), set when it
-- first suspends there; NULL for a wait without timeout and for a sleep.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS wait_until timestamptz;

-- Runs at a wait now: their wake_at is the deadline unless a signal already
-- woke them (then it is lost, and the run reads that signal anyway).
UPDATE runs r SET wait_until = r.wake_at
WHERE r.status <> 'completed' AND r.wait_kind = 'signal' AND r.wake_at IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM signals s
    WHERE s.tenant_id = r.tenant_id AND s.key = r.key AND s.run_id = r.run_id AND s.name = r.wait_name
  );

-- 'discarded': a wait found a stored signal that fails its schema and threw
-- it away (the entry's error says why); the run waits for another.
ALTER TABLE run_history DROP CONSTRAINT IF EXISTS run_history_outcome_check;
ALTER TABLE run_history ADD CONSTRAINT run_history_outcome_check
  CHECK (outcome IN ('started', 'interrupted', 'succeeded', 'failed', 'reconciled', 'discarded'));
