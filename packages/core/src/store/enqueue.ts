/**
 * `engine.enqueue`: a run created inside the caller's own transaction, so it
 * exists exactly when that transaction commits. It starts suspended and due
 * at once, with attempt 0, and no owner: a worker's (or a retry's) take of a
 * due run starts it.
 */

import type { NewRun } from "./claim.js";
import { rewriteExpiredRecord } from "./claim.js";
import { DUE_CHANNEL } from "./notify-channels.js";
import type { Executor, RunStatus, Tables, Tombstone } from "./run-store.js";
import { readAdmission } from "./run-store.js";
import { sql } from "./sql.js";
import type { TombstoneColumns } from "./tombstones.js";
import { tombstoneOf } from "./tombstones.js";

/** What an enqueued run stores: a claim without owner and lease, with its priority (null: its workflow's). */
export type EnqueuedRun = Omit<NewRun, "ownerToken" | "leaseMs"> & { readonly priority: number | null };

/** What the enqueue statement found. */
export type EnqueueOutcome =
  | { readonly kind: "created" }
  | {
      readonly kind: "existing";
      readonly workflow: string;
      readonly fingerprint: string;
      readonly status: RunStatus;
      /** A completed record past retention: it counts as absent, unless `tombstone` still refuses the key. */
      readonly expired: boolean;
      /** Set while the key is tombstoned (its record expired, swept or not, and its tombstone time has not passed). */
      readonly tombstone: Tombstone | null;
    }
  /** A concurrent insert committed after this statement's snapshot; ask again. */
  | { readonly kind: "raced" };

interface EnqueueRow extends TombstoneColumns {
  created: boolean;
  workflow: string | null;
  fingerprint: string | null;
  status: RunStatus | null;
  expired: boolean | null;
}

/**
 * Read the key, and insert the run when it has neither a record nor a live
 * tombstone, in one statement on the caller's transaction; the NOTIFY it
 * queues is delivered when (and if) that transaction commits.
 *
 * Races closed: (1) two transactions enqueueing one key. The primary key
 * lets one INSERT win; the other's `ON CONFLICT DO NOTHING` waits for it to
 * commit (or roll back), and the caller asks again. (2) The sweeper turning
 * the key's expired record into a tombstone meanwhile: both are read in
 * this statement's one snapshot, which holds the record or the tombstone
 * (they change in one commit), so a tombstoned key is never inserted.
 * Nothing of a refused enqueue is written.
 */
export async function enqueueRun(tx: Executor, t: Tables, run: EnqueuedRun): Promise<EnqueueOutcome> {
  const { rows } = await sql<EnqueueRow>`/* idempo:enqueue */
    WITH existing AS (
      SELECT r.workflow, r.fingerprint, r.status, x.expired, r.outcome,
             CASE WHEN x.expired THEN r.completed_at END AS completed_at,
             CASE WHEN x.expired THEN r.expires_at END AS expires_at,
             CASE WHEN x.expired AND x.kept_until > clock_timestamp() THEN x.kept_until END AS tombstone_until
      FROM ${t.runs} r
      CROSS JOIN LATERAL (
        SELECT r.status = 'completed' AND r.expires_at <= clock_timestamp() AS expired,
               r.expires_at + r.tombstone_ms * interval '1 millisecond' AS kept_until
      ) x
      WHERE r.tenant_id = ${run.tenantId} AND r.key = ${run.key}
    ), buried AS (
      SELECT tb.workflow, encode(tb.fingerprint, 'hex') AS fingerprint, 'completed'::text AS status, true AS expired,
             tb.outcome, tb.completed_at, tb.expired_at AS expires_at, tb.kept_until AS tombstone_until
      FROM ${t.tombstones} tb
      WHERE tb.tenant_id = ${run.tenantId} AND tb.key_digest = ${t.keyDigest}(${run.key})
        AND tb.kept_until > clock_timestamp()
        AND NOT EXISTS (SELECT 1 FROM existing)
    ), found AS (
      SELECT * FROM existing UNION ALL SELECT * FROM buried
    ), inserted AS (
      INSERT INTO ${t.runs} (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                             input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                             tombstone_ms, wake_at, durable, workflow_version, priority)
      SELECT ${run.tenantId}, ${run.key}, ${run.runId}, ${run.workflow}, ${JSON.stringify(run.outline)}::json,
             ${run.definitionHash}, ${run.fingerprint}, ${run.input}::json, ${run.parsedInputHash}, 'suspended',
             NULL, NULL, 0, ${run.retentionMs}, ${run.tombstoneMs}, clock_timestamp(), true, ${run.workflowVersion},
             ${run.priority}::int
      WHERE NOT EXISTS (SELECT 1 FROM found)
      ON CONFLICT (tenant_id, key) DO NOTHING
      RETURNING workflow
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM inserted
    )
    SELECT EXISTS (SELECT 1 FROM inserted) AS created, (SELECT count(*) FROM notified) AS notified, f.*
    FROM (VALUES (1)) AS one (x)
    LEFT JOIN found f ON true
  `.execute(tx);
  const row = readAdmission(rows[0], (r) => r.created === true, "enqueue");
  if (row === "made") return { kind: "created" };
  if (row === "raced") return { kind: "raced" };
  return {
    kind: "existing",
    workflow: row.workflow,
    fingerprint: row.fingerprint,
    status: row.status,
    expired: row.expired === true,
    tombstone: tombstoneOf(row),
  };
}

/**
 * Enqueue on a key whose completed record is past retention and past its
 * tombstone's time (it counts as absent): rewrite the record as a new
 * enqueued run, dropping the old run's history and signals. Returns false
 * when another caller got there first.
 *
 * Race closed: as for the claim's reclaim, the row lock lets one caller
 * rewrite the record; the others re-check the guard against the new
 * version, find it no longer completed, and read it again.
 */
export async function reclaimExpiredForEnqueue(tx: Executor, t: Tables, run: EnqueuedRun): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:reclaim_enqueue */
    WITH ${rewriteExpiredRecord(
      t,
      run,
      sql`status = 'suspended', owner_token = NULL, locked_until = NULL, attempt = 0,
          wake_at = clock_timestamp(), durable = true, priority = ${run.priority}::int`,
      sql`workflow`,
    )}, notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM reset
    )
    SELECT (SELECT count(*) FROM reset)::int AS n, (SELECT count(*) FROM notified) AS notified
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}
