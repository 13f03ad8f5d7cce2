/**
 * The writes of a parallel item, whose branches are steps called at the
 * same time. A branch moves through its history entry, as a step does:
 * started (`recordBranchStarted`) → recorded with its result
 * (`recordBranchResult`), or failed (`recordFailure` of progress.ts); a
 * later attempt that finds it started turns it interrupted. The result
 * stays on the entry until the item commits (`commitParallel` moves the
 * results into the run's state and drops them from the entries) or a
 * `retryFrom` rewinds the run (`rewindRun` drops them: every branch runs
 * again). Between those, a branch with a result is recorded and is never
 * called again (`recordedBranches`). Every write is fenced on the owner token.
 */

import type { Advance, StartedEntry } from "./progress.js";
import { commitAdvance, recordStarted } from "./progress.js";
import type { Executor, Ownership, Tables } from "./run-store.js";
import { sql } from "./sql.js";

export interface BranchStart {
  /** The parallel item's name. */
  readonly name: string;
  readonly branch: string;
  readonly attempt: number;
  readonly derivedKey: string;
}

/**
 * Record that a branch is about to be called, so a later attempt knows the
 * call may have reached the other system. Reports how many entries the
 * branch already has in this run (an earlier start: in doubt).
 *
 * Race closed: none beyond the fence; the entry of a zombie whose snapshot
 * still saw its token is an extra `started` line in the history, which the
 * successor's own start turns interrupted.
 *
 * @returns null when the attempt no longer owns the key.
 */
export async function recordBranchStarted(
  db: Executor,
  t: Tables,
  own: Ownership,
  start: BranchStart,
): Promise<StartedEntry | null> {
  // The statement is the function record_branch_started of migration 0019.
  return recordStarted(db, t, "record_branch_started", own, [
    start.name,
    start.branch,
    start.attempt,
    start.derivedKey,
  ]);
}

/**
 * Record a branch's result (JSON text) on its entry, with its tries (JSON
 * text of every call, or null for one), and extend the lease.
 *
 * Race closed: a zombie recording a branch after another attempt took the
 * run over, or after the item committed. The statement updates the run's
 * row first, fenced on the owner token; that row lock orders it against a
 * takeover, so a zombie's result is never kept for a successor to trust.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function recordBranchResult(
  db: Executor,
  t: Tables,
  own: Ownership,
  entry: { readonly entryId: string; readonly outcome: "succeeded" | "reconciled"; readonly result: string },
  leaseMs: number,
  tries: string | null,
): Promise<boolean> {
  // The statement is the function record_branch_result of migration 0019.
  const rows = await t.calls.call<{ ok: boolean }>(db, "record_branch_result", [
    own.tenantId,
    own.key,
    own.ownerToken,
    entry.entryId,
    entry.outcome,
    entry.result,
    leaseMs,
    tries,
  ]);
  return rows[0]?.ok === true;
}

/**
 * The branches of the parallel item `name` recorded in this run since it
 * last committed or was rewound, with their results as JSON text. Read
 * once, when an attempt reaches the item; a branch not in the answer is
 * called (again).
 */
export async function recordedBranches(
  db: Executor,
  t: Tables,
  own: Ownership,
  name: string,
): Promise<Map<string, string>> {
  const { rows } = await sql<{ branch: string; result: string }>`/* idempo:recorded_branches */
    SELECT DISTINCT ON (branch) branch, result::text AS result FROM ${t.history}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
      AND kind = 'branch' AND name = ${name} AND result IS NOT NULL
    ORDER BY branch, finished_at DESC
  `.execute(db);
  return new Map(rows.map((r) => [r.branch, r.result]));
}

/**
 * Commit a parallel item once every branch is recorded: move the recovery
 * point to it with the branches' results in the state (or complete the run
 * when the advance carries a response), write the item's history entry and
 * drop the results from the branch entries, in one fenced statement.
 *
 * Race closed: a zombie committing the item after a takeover matches no
 * row and changes nothing, as a step's result does.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function commitParallel(db: Executor, t: Tables, own: Ownership, adv: Advance): Promise<boolean> {
  // The statement is the function commit_parallel of migration 0019.
  return commitAdvance(db, t, "commit_parallel", own, adv, false);
}
