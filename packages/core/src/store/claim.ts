/**
 * The claim state machine's three transitions, one statement each. The
 * common paths are the cheapest: a new key is claimed in one round trip, and
 * a replay is answered by the same round trip without writing anything.
 */

import type { Executor, ExistingRun, RunStatus, Tables, TakenRun, TakenRunRow } from "./run-store.js";
import { leaseInterval, readAdmission, takenRunOf } from "./run-store.js";
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";
import type { TombstoneColumns } from "./tombstones.js";
import { pastTombstone, tombstoneOf } from "./tombstones.js";

export interface NewRun {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly workflow: string;
  /** The version of the definition that starts the run. */
  readonly workflowVersion: number;
  readonly outline: readonly string[];
  readonly definitionHash: string;
  readonly fingerprint: string;
  /** JSON text. */
  readonly input: string;
  /** Hash of the schema's output at the claim; null when that output is not JSON. */
  readonly parsedInputHash: string | null;
  readonly ownerToken: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  /** How long the record's tombstone stays after its retention, in ms; 0 for none. */
  readonly tombstoneMs: number;
}

export type ClaimResult =
  | { readonly kind: "claimed" }
  | { readonly kind: "existing"; readonly run: ExistingRun }
  /** A concurrent claim committed between this statement's snapshot and its insert; ask again. */
  | { readonly kind: "raced" };

interface ClaimRow extends TombstoneColumns {
  claimed: boolean;
  workflow: string | null;
  fingerprint: string | null;
  status: RunStatus | null;
  lease_remaining_ms: number | null;
  expired: boolean | null;
  parked_reason: string | null;
  response_status: number | null;
  response_body: string | null;
  wake_remaining_ms: number | null;
}

/**
 * Claim a new key, or read the existing record, in one round trip.
 *
 * The key is read first, so a replay or a 409 is answered by that read
 * alone, without trying an INSERT. Race closed: two first requests for one
 * key. The unique primary key makes exactly one INSERT win; `ON CONFLICT DO
 * NOTHING` (not `DO UPDATE`) means the loser takes no row lock and writes
 * nothing, and reads the winner's committed row again. When that row is gone
 * by then (forgotten, swept), the caller simply asks again.
 */
export async function claimNewKey(db: Executor, t: Tables, run: NewRun): Promise<ClaimResult> {
  // The statement is the function claim_new_key of migration 0010 (a cached plan on every driver).
  const rows = await t.calls.call<ClaimRow>(db, "claim_new_key", [
    run.tenantId,
    run.key,
    run.runId,
    run.workflow,
    run.workflowVersion,
    JSON.stringify(run.outline),
    run.definitionHash,
    run.fingerprint,
    run.input,
    run.parsedInputHash,
    run.ownerToken,
    run.leaseMs,
    run.retentionMs,
    run.tombstoneMs,
  ]);
  const row = readAdmission(rows[0], (r) => r.claimed === true, "claim");
  if (row === "made") return { kind: "claimed" };
  if (row === "raced") return { kind: "raced" };
  return {
    kind: "existing",
    run: {
      workflow: row.workflow,
      fingerprint: row.fingerprint,
      status: row.status,
      leaseRemainingMs: row.lease_remaining_ms ?? 0,
      expired: row.expired === true,
      outcome: row.outcome,
      parkedReason: row.parked_reason,
      responseStatus: row.response_status,
      responseBody: row.response_body,
      wakeRemainingMs: row.wake_remaining_ms,
      tombstone: tombstoneOf(row),
    },
  };
}

/**
 * Start a new run on a key whose completed record is past retention and
 * past its tombstone's time, which counts as absent whether or not the
 * sweeper has deleted it yet. Returns false when another caller got there
 * first (or the record still refuses the key).
 *
 * Race closed: ten callers on one expired key. The UPDATE row-locks the
 * record; the first rewrites it to in flight, and every other caller
 * re-checks the WHERE against that new version, finds it in flight, and
 * falls back to the claim (and so to 409). The old run's history goes in
 * the same statement.
 */
export async function reclaimExpiredKey(db: Executor, t: Tables, run: NewRun): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:reclaim */
    WITH ${rewriteExpiredRecord(
      t,
      run,
      sql`status = 'in_flight', owner_token = ${run.ownerToken},
          locked_until = clock_timestamp() + ${leaseInterval(run.leaseMs)}, attempt = 1,
          wake_at = NULL, durable = false, priority = NULL`,
      sql`1`,
    )}
    SELECT count(*)::int AS n FROM reset
  `.execute(db);
  return (rows[0]?.n ?? 0) === 1;
}

/**
 * The CTEs `reset`, `forget` and `forget_signals` of a statement that
 * reuses a key whose completed record is past retention and past its
 * tombstone's time: `reset` rewrites the record as the new run `run` (with
 * `start`, the SET items in which a claimed and an enqueued run differ) and
 * returns `returning`; nothing of the old run stays in the row (its wait,
 * deadline, outbox round, trace parent). The other two delete the old run's history and
 * signals, only when the rewrite happened. Shared by the claim's reclaim and
 * the enqueue's (store/enqueue.ts).
 *
 * Race closed: callers reusing one expired key at once. The UPDATE
 * row-locks the record; the first rewrites it, and every other caller
 * re-checks the WHERE against that new version, finds it no longer
 * completed, and rewrites nothing.
 */
export function rewriteExpiredRecord(
  t: Tables,
  run: Omit<NewRun, "ownerToken" | "leaseMs">,
  start: Sql,
  returning: Sql,
): Sql {
  return sql`reset AS (
      UPDATE ${t.runs}
      SET run_id = ${run.runId}, workflow = ${run.workflow}, definition = ${JSON.stringify(run.outline)}::json,
          definition_hash = ${run.definitionHash}, workflow_version = ${run.workflowVersion},
          fingerprint = ${run.fingerprint}, input = ${run.input}::json, parsed_input_hash = ${run.parsedInputHash},
          ${start}, attempt_floor = 0, outbox_round = 0, trace_parent = NULL, parked_reason = NULL, parked_at = NULL,
          wait_kind = NULL, wait_name = NULL, wait_until = NULL, recovery_point = NULL, state = '{}', retention_ms = ${run.retentionMs},
          tombstone_ms = ${run.tombstoneMs}, outcome = NULL, response_status = NULL, response_body = NULL,
          expires_at = NULL, created_at = now(), updated_at = now(), completed_at = NULL,
          concurrency_key = NULL, concurrency_max = NULL
      WHERE tenant_id = ${run.tenantId} AND key = ${run.key}
        AND status = 'completed' AND ${pastTombstone}
      RETURNING ${returning}
    ), forget AS (
      DELETE FROM ${t.history} h
      WHERE h.tenant_id = ${run.tenantId} AND h.key = ${run.key} AND EXISTS (SELECT 1 FROM reset)
    ), forget_signals AS (
      DELETE FROM ${t.signals} s
      WHERE s.tenant_id = ${run.tenantId} AND s.key = ${run.key} AND EXISTS (SELECT 1 FROM reset)
    )`;
}

export interface TakeoverRequest {
  readonly tenantId: string;
  readonly key: string;
  readonly ownerToken: string;
  readonly leaseMs: number;
  /** A client retry must match the stored fingerprint; the stale-run resumer passes null. */
  readonly fingerprint: string | null;
  /** The workflow's `maxAttempts`: the takeover that would start one more parks the run instead. */
  readonly maxAttempts: number;
}

/** What a takeover found: the run to resume, or the run parked because its attempts ran out. */
export type TakeoverResult =
  | { readonly kind: "taken"; readonly run: TakenRun }
  | { readonly kind: "parked"; readonly reason: string };

interface TakeoverRow extends TakenRunRow {
  status: RunStatus;
  parked_reason: string | null;
}

/**
 * Take over an in-flight run whose lease has expired: mint a new owner
 * token, extend the lease, count the attempt, and return what the new owner
 * needs to resume, in one statement. When the attempts since the last
 * unpark already reached `maxAttempts`, the same statement parks the run
 * instead of starting another attempt.
 *
 * Races closed: (1) many retries at the moment a lease runs out: the row
 * lock serialises them, and every loser re-evaluates `locked_until <=
 * clock_timestamp()` against the winner's fresh lease and gets nothing. (2)
 * The old owner's renewal against a takeover: whichever commits first wins;
 * a renewal first leaves the lease valid, a takeover first changes the token
 * the renewal is fenced on. (3) Two resumers both deciding "one more
 * attempt is allowed": the attempt is counted and checked against the
 * budget under the same row lock, at claim time (a takeover that then
 * crashes the process still counted), so the budget can never be overrun.
 */
export async function takeOverExpiredLease(
  db: Executor,
  t: Tables,
  req: TakeoverRequest,
): Promise<TakeoverResult | null> {
  const reason = `maxAttempts (${req.maxAttempts}) reached: ${req.maxAttempts} attempts started and none finished`;
  // The statement is the function take_over_expired_lease of migration 0008.
  const rows = await t.calls.call<TakeoverRow>(db, "take_over_expired_lease", [
    req.tenantId,
    req.key,
    req.ownerToken,
    req.leaseMs,
    req.fingerprint,
    req.maxAttempts,
    reason,
  ]);
  const row = rows[0];
  if (!row) return null;
  if (row.status === "parked") return { kind: "parked", reason: row.parked_reason ?? reason };
  return { kind: "taken", run: takenRunOf(row) };
}
