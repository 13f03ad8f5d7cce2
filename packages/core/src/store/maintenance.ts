/**
 * Background statements: finding abandoned runs and sweeping expired
 * records into tombstones (tombstones.ts sweeps those in turn, with the
 * same `deleteDueBatch` as the outbox's sweep here). Both skip rows others
 * hold, so they never stall the hot path.
 */

import type { Executor, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";

export interface StaleRun {
  readonly tenantId: string;
  readonly key: string;
  readonly workflow: string;
}

/**
 * In-flight runs whose lease has expired (DB clock), oldest lease first.
 * Only a candidate list: each is then taken over with the same atomic
 * statement a client retry uses, so a resumer racing a client is safe.
 *
 * Cost follows the stale rows, not the table: the range on `locked_until`
 * is an index condition on `runs_in_flight_locked_until` because it compares
 * with `now()` (the statement's start in autocommit), which the planner can
 * use; a bare `clock_timestamp()` is volatile and forces a full scan.
 */
export async function selectStaleRuns(
  db: Executor,
  t: Tables,
  workflows: readonly string[],
  limit: number,
): Promise<StaleRun[]> {
  const { rows } = await sql<{ tenant_id: string; key: string; workflow: string }>`
    SELECT tenant_id, key, workflow FROM ${t.runs}
    WHERE status = 'in_flight' AND locked_until <= now()
      AND workflow = ANY(${sql.val(workflows)}::text[])
    ORDER BY locked_until
    LIMIT ${limit}
  `.execute(db);
  return rows.map((r) => ({ tenantId: r.tenant_id, key: r.key, workflow: r.workflow }));
}

/**
 * Delete one bounded batch of completed records past retention, with their
 * history and signals, and leave a tombstone for each one whose tombstone
 * time has not passed; returns how many records went.
 *
 * Races closed: rows a claim is reclaiming right now are locked and skipped
 * (SKIP LOCKED), never waited on; the DELETE re-checks status and expiry so
 * a row that turned in flight is never deleted. In-flight rows never match.
 * The record goes and its tombstone comes in the same statement, so a
 * claim reading the key sees one or the other, never neither. A tombstone
 * already there (of an earlier run of the key, past its time) is replaced.
 * A completed child run whose parent has not completed (it waits for its
 * siblings, or has yet to read the responses) is skipped until it has.
 * The batch is read in expiry order from `runs_completed_expires_at`
 * (`now()` is an index condition, `clock_timestamp()` is not), so a sweep
 * with nothing expired reads one index page, whatever the table's size.
 */
export async function sweepBatch(db: Executor, t: Tables, batchSize: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    WITH doomed AS (
      SELECT tenant_id, key FROM ${t.runs} c
      WHERE status = 'completed' AND expires_at <= now()
        -- A child whose parent has not completed is kept: the parent still reads its response (0020).
        AND (c.parent_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${t.runs} p
          WHERE p.tenant_id = c.tenant_id AND p.key = c.parent_key AND p.run_id = c.parent_run_id
            AND p.status <> 'completed'
        ))
      ORDER BY expires_at
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    ), gone AS (
      DELETE FROM ${t.runs} r USING doomed d
      WHERE r.tenant_id = d.tenant_id AND r.key = d.key
        AND r.status = 'completed' AND r.expires_at <= clock_timestamp()
      RETURNING r.tenant_id, r.key, r.run_id, r.workflow, r.outcome, r.fingerprint,
                coalesce(r.completed_at, r.updated_at) AS completed_at, r.expires_at,
                r.expires_at + r.tombstone_ms * interval '1 millisecond' AS kept_until
    ), buried AS (
      INSERT INTO ${t.tombstones} (completed_at, expired_at, kept_until, tenant_id, key_digest, workflow, outcome,
                                   fingerprint)
      SELECT completed_at, expires_at, kept_until, tenant_id, ${t.keyDigest}(key), workflow, coalesce(outcome, 'succeeded'),
             -- The engine's fingerprints are SHA-256 hex; a row written some other way still gets 32 bytes.
             CASE WHEN fingerprint ~ '^[0-9a-f]{64}$' THEN decode(fingerprint, 'hex')
                  ELSE sha256(convert_to(fingerprint, 'UTF8')) END
      FROM gone
      WHERE kept_until > clock_timestamp()
      ON CONFLICT (tenant_id, key_digest) DO UPDATE
      SET completed_at = excluded.completed_at, expired_at = excluded.expired_at, kept_until = excluded.kept_until,
          workflow = excluded.workflow, outcome = excluded.outcome, fingerprint = excluded.fingerprint
    ), forgotten AS (
      DELETE FROM ${t.history} h USING gone g
      WHERE h.tenant_id = g.tenant_id AND h.key = g.key AND h.run_id = g.run_id
    ), forgotten_signals AS (
      DELETE FROM ${t.signals} s USING gone g
      WHERE s.tenant_id = g.tenant_id AND s.key = g.key AND s.run_id = g.run_id
    )
    SELECT count(*)::int AS n FROM gone
  `.execute(db);
  return rows[0]?.n ?? 0;
}

/**
 * Delete one bounded batch of outbox messages delivered more than
 * `keepMs` ago. Pending and dead messages are never touched. Read in
 * delivery order from `outbox_delivered_at`, like the record sweep.
 */
export function sweepOutboxBatch(db: Executor, t: Tables, batchSize: number, keepMs: number): Promise<number> {
  const due = sql`status = 'delivered' AND delivered_at <= now() - ${leaseInterval(keepMs)}`;
  return deleteDueBatch(db, { table: t.outbox, id: "message_id", due, order: sql`delivered_at` }, batchSize);
}

/** The rows of one table that a sweep deletes once they are due. */
export interface DueRows {
  /** The statement's marker comment (logs, `pg_stat_statements`); none when absent. */
  readonly marker?: Sql;
  readonly table: Sql;
  /** The column that names a row within its tenant. */
  readonly id: "message_id" | "key_digest";
  /** When a row is due: compared with `now()`, an index condition on the index that `order` reads. */
  readonly due: Sql;
  readonly order: Sql;
  /** What the DELETE checks again of the row's version under its lock (the row as `x`); absent when a due row stays due. */
  readonly stillDue?: Sql;
}

/**
 * Delete one bounded batch of the due rows of `rows.table`: at most
 * `batchSize`, read in `rows.order`, so a sweep with nothing due reads one
 * index page whatever the table's size; returns how many went. Race
 * closed: rows others hold are locked and skipped (SKIP LOCKED), never
 * waited on, so a sweep never stalls the hot path.
 */
export async function deleteDueBatch(db: Executor, rows: DueRows, batchSize: number): Promise<number> {
  const id = sql.id(rows.id);
  const stillDue = rows.stillDue ? sql` AND ${rows.stillDue}` : sql``;
  const answer = await sql<{ n: number }>`${rows.marker ?? sql``}
    WITH doomed AS (
      SELECT tenant_id, ${id} FROM ${rows.table}
      WHERE ${rows.due}
      ORDER BY ${rows.order}
      LIMIT ${batchSize}
      FOR UPDATE SKIP LOCKED
    ), gone AS (
      DELETE FROM ${rows.table} x USING doomed d
      WHERE x.tenant_id = d.tenant_id AND x.${id} = d.${id}${stillDue}
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone
  `.execute(db);
  return answer.rows[0]?.n ?? 0;
}
