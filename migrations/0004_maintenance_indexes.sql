-- Why: the statements that scan across tenants (the sweep of expired records
-- and of delivered outbox messages, stale-run discovery, `keys stuck`, the
-- relay's claim of due messages, the stuck and expired counts of stats) must be driven by an index on what
-- they filter and order by, so that their cost follows the rows they find and
-- not the size of the table. The partial indexes of 0001 and 0002 lead with
-- tenant_id, so a range over expires_at, locked_until or available_at across
-- all tenants could not use them; these replace them. Only unique constraints
-- must contain tenant_id (distribution by tenant); a per-shard index on a
-- timestamp is fine.
-- IF NOT EXISTS: this file runs inside the migration transaction, which cannot
-- build an index CONCURRENTLY. On a large live table, build these first with
-- CREATE INDEX CONCURRENTLY under the same names; the migration then only
-- drops the old indexes.

-- engine.sweep(): completed records past retention, oldest expiry first.
CREATE INDEX IF NOT EXISTS runs_completed_expires_at ON runs (expires_at) WHERE status = 'completed';
-- resumeStale and `keys stuck`: in-flight runs by lease end.
CREATE INDEX IF NOT EXISTS runs_in_flight_locked_until ON runs (locked_until) WHERE status = 'in_flight';
-- The relay's claim: pending messages by due time.
CREATE INDEX IF NOT EXISTS outbox_pending_available_at ON outbox (available_at) WHERE status = 'pending';
-- The outbox sweep: delivered messages by delivery time.
CREATE INDEX IF NOT EXISTS outbox_delivered_at ON outbox (delivered_at) WHERE status = 'delivered';

-- Superseded by the indexes above; each one was another write on the hot path.
DROP INDEX IF EXISTS runs_completed_expiry;
DROP INDEX IF EXISTS runs_in_flight_lease;
DROP INDEX IF EXISTS outbox_due;
