-- Why: a delivery key names the logical message (tenant, key, run, phase,
-- position in the phase), so it is the same on every attempt, takeover and
-- retryFrom, and a receiver deduplicating on it applies the message once.
-- Until now the derived key also hashed the run's attempt, only so that a
-- successor's insert never waited on the unique index behind a paused
-- zombie's uncommitted row of the same key. The attempt moves from the key
-- into the unique constraint instead: the zombie's row and its successor's
-- differ in run_attempt, so neither waits on the other, and only the attempt
-- whose phase commit holds the fence leaves its row. A phase run again by
-- retryFrom leaves a second row under the same key (the relay delivers it,
-- the receiver drops it as a copy).
-- retryFrom(..., { resendOutbox: true }) counts outbox_round up: the keys of
-- a later round are derived from those of round 0 and the round number.
-- Rows written before this migration keep run_attempt 0 and their old keys.
-- Rebuilding the unique index locks the outbox table while it runs.

-- The run attempt whose phase enqueued the row (0 for rows written before 0011).
ALTER TABLE outbox ADD COLUMN run_attempt integer NOT NULL DEFAULT 0;
ALTER TABLE outbox DROP CONSTRAINT IF EXISTS outbox_tenant_id_delivery_key_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_tenant_delivery_key_attempt UNIQUE (tenant_id, delivery_key, run_attempt);

-- How many times retryFrom minted new delivery keys for this run (resendOutbox).
ALTER TABLE runs ADD COLUMN outbox_round integer NOT NULL DEFAULT 0;
