-- Why: runs that cannot finish need states of their own. 'parked' is a run the
-- engine stopped trying (attempts exhausted, or a value that cannot be stored);
-- 'suspended' is a run waiting for a time or a signal with no process holding
-- it. An operator's cancel completes a run with the outcome 'canceled'.
-- attempt_floor makes unpark and retryFrom hand out a fresh attempt budget
-- without renumbering the attempts the history already names.

ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
  CHECK (status IN ('in_flight', 'completed', 'parked', 'suspended'));

ALTER TABLE runs DROP CONSTRAINT runs_outcome_check;
ALTER TABLE runs ADD CONSTRAINT runs_outcome_check
  CHECK (outcome IN ('succeeded', 'failed', 'errored', 'canceled'));

-- Why the engine stopped trying, in words an operator can act on; set only while parked.
ALTER TABLE runs ADD COLUMN parked_reason text;
ALTER TABLE runs ADD COLUMN parked_at timestamptz;
-- The attempt number at the last unpark (0 before any): maxAttempts counts the
-- attempts above it.
ALTER TABLE runs ADD COLUMN attempt_floor integer NOT NULL DEFAULT 0;

-- No process owns a run that is not in flight; a completed run has its response.
ALTER TABLE runs DROP CONSTRAINT runs_check;
ALTER TABLE runs ADD CONSTRAINT runs_state_check CHECK (
  status = 'in_flight'
  OR (status IN ('parked', 'suspended') AND owner_token IS NULL)
  OR (status = 'completed' AND owner_token IS NULL AND response_status IS NOT NULL AND expires_at IS NOT NULL)
);
ALTER TABLE runs ADD CONSTRAINT runs_parked_reason_check CHECK (status <> 'parked' OR parked_reason IS NOT NULL);

-- Operators list parked runs (idempo keys parked) without scanning the table.
CREATE INDEX runs_parked ON runs (tenant_id, parked_at) WHERE status = 'parked';
