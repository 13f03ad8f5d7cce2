/**
 * `engine.enqueue`: a run created inside the caller's own transaction, so it
 * exists exactly when that transaction commits. It starts suspended and due
 * at once, with attempt 0, and no owner: a worker's (or a retry's) take of a
 * due run starts it.
 */
import { sql } from "kysely";
import type { NewRun } from "./claim.js";
import { DUE_CHANNEL } from "./notify-channels.js";
import type { Executor, RunStatus, Tables } from "./run-store.js";

/** What an enqueued run stores: a claim without owner and lease. */
export type EnqueuedRun = Omit<NewRun, "ownerToken" | "leaseMs">;

/** What the enqueue statement found. */
export type EnqueueOutcome =
  | { readonly kind: "created" }
  | {
      readonly kind: "existing";
      readonly workflow: string;
      readonly fingerprint: string;
      readonly status: RunStatus;
      /** A completed record past retention: it counts as absent. */
      readonly expired: boolean;
    }
  /** A concurrent insert committed after this statement's snapshot; ask again. */
  | { readonly kind: "raced" };

interface EnqueueRow {
  created: boolean;
  workflow: string | null;
  fingerprint: string | null;
  status: RunStatus | null;
  expired: boolean | null;
}

/**
 * Insert the run, or read the record the key already has, in one statement
 * on the caller's transaction; the NOTIFY it queues is delivered when (and
 * if) that transaction commits.
 *
 * Race closed: two transactions enqueueing one key. The primary key lets one
 * INSERT win; the other waits for it to commit (or roll back) and then
 * either reads the winner's row or inserts its own. Nothing of a refused
 * enqueue is written.
 */
export async function enqueueRun(tx: Executor, t: Tables, run: EnqueuedRun): Promise<EnqueueOutcome> {
  const { rows } = await sql<EnqueueRow>`/* idempo:enqueue */
    WITH inserted AS (
      INSERT INTO ${t.runs} (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                             input, parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                             wake_at, durable, workflow_version)
      VALUES (${run.tenantId}, ${run.key}, ${run.runId}, ${run.workflow}, ${JSON.stringify(run.outline)}::json,
              ${run.definitionHash}, ${run.fingerprint}, ${run.input}::json, ${run.parsedInputHash}, 'suspended',
              NULL, NULL, 0, ${run.retentionMs}, clock_timestamp(), true, ${run.workflowVersion})
      ON CONFLICT (tenant_id, key) DO NOTHING
      RETURNING workflow
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM inserted
    )
    SELECT EXISTS (SELECT 1 FROM inserted) AS created, (SELECT count(*) FROM notified) AS notified,
           r.workflow, r.fingerprint, r.status,
           (r.status = 'completed' AND r.expires_at <= clock_timestamp()) AS expired
    FROM (VALUES (1)) AS one (x)
    LEFT JOIN ${t.runs} r ON r.tenant_id = ${run.tenantId} AND r.key = ${run.key}
  `.execute(tx);
  const row = rows[0];
  if (!row) throw new Error("enqueue statement returned no row");
  if (row.created === true) return { kind: "created" };
  if (row.status === null || row.workflow === null || row.fingerprint === null) return { kind: "raced" };
  return {
    kind: "existing",
    workflow: row.workflow,
    fingerprint: row.fingerprint,
    status: row.status,
    expired: row.expired === true,
  };
}

/**
 * Enqueue on a key whose completed record is past retention (it counts as
 * absent): rewrite the record as a new enqueued run, dropping the old run's
 * history and signals. Returns false when another caller got there first.
 *
 * Race closed: as for the claim's reclaim, the row lock lets one caller
 * rewrite the record; the others re-check the guard against the new
 * version, find it no longer completed, and read it again.
 */
export async function reclaimExpiredForEnqueue(tx: Executor, t: Tables, run: EnqueuedRun): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:reclaim_enqueue */
    WITH reset AS (
      UPDATE ${t.runs}
      SET run_id = ${run.runId}, workflow = ${run.workflow}, definition = ${JSON.stringify(run.outline)}::json,
          definition_hash = ${run.definitionHash}, workflow_version = ${run.workflowVersion},
          fingerprint = ${run.fingerprint}, input = ${run.input}::json, parsed_input_hash = ${run.parsedInputHash},
          status = 'suspended', owner_token = NULL, locked_until = NULL, attempt = 0, attempt_floor = 0,
          parked_reason = NULL, parked_at = NULL, wake_at = clock_timestamp(), wait_kind = NULL, wait_name = NULL,
          durable = true, recovery_point = NULL, state = '{}', retention_ms = ${run.retentionMs}, outcome = NULL,
          response_status = NULL, response_body = NULL, expires_at = NULL, trace_parent = NULL,
          created_at = now(), updated_at = now(), completed_at = NULL
      WHERE tenant_id = ${run.tenantId} AND key = ${run.key}
        AND status = 'completed' AND expires_at <= clock_timestamp()
      RETURNING workflow
    ), forget AS (
      DELETE FROM ${t.history} h
      WHERE h.tenant_id = ${run.tenantId} AND h.key = ${run.key} AND EXISTS (SELECT 1 FROM reset)
    ), forget_signals AS (
      DELETE FROM ${t.signals} s
      WHERE s.tenant_id = ${run.tenantId} AND s.key = ${run.key} AND EXISTS (SELECT 1 FROM reset)
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM reset
    )
    SELECT (SELECT count(*) FROM reset)::int AS n, (SELECT count(*) FROM notified) AS notified
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}
