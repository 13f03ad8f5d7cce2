/**
 * The writes a run makes while it owns its key. Every one is fenced on the
 * owner token: an attempt that lost its lease changes nothing, and learns so
 * from the affected-row count of that very statement.
 */

import { newId } from "../ids.js";
import type { Executor, Ownership, StoredResponse, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";

/** Error text as a text column accepts it: PostgreSQL text cannot hold NUL. */
export function storableText(text: string): string {
  return text.replaceAll("\u0000", "\\u0000");
}

/** Who completes a run: the attempt that owns it (fenced on its token), or an operator's cancel. */
export type Completer = { readonly ownerToken: string } | "operator";

/**
 * The call of `mark_completed` (migration 0014) as a FROM item: the one
 * statement that completes a run (stores the response, drops owner and
 * lease, starts retention, and announces a durable run's completion on
 * `DONE_CHANNEL` for `engine.wait`). It yields the completed row of `runs`,
 * or no row when the run was not the completer's to complete. `last` is the
 * run's last item when the completion also advances past it (its name and
 * the JSON text of the state), `pastWait` when that item is a wait.
 */
export function markCompleted(
  t: Tables,
  tenantId: string,
  key: string,
  by: Completer,
  response: StoredResponse,
  last?: { readonly name: string; readonly state: string; readonly pastWait: boolean },
): Sql {
  const ownerToken = by === "operator" ? null : by.ownerToken;
  return sql`${t.markCompleted}(${tenantId}, ${key}, ${ownerToken}::text, ${by === "operator"},
    ${response.outcome}, ${response.status}::integer, ${response.body}::json,
    ${last?.name ?? null}::text, ${last?.state ?? null}::json, ${last?.pastWait ?? false})`;
}

/**
 * The slot fence of a write of the run's own row, beside its owner-token
 * fence (`WHERE ... AND ${slotFence(t)}`): a run under a concurrency limit
 * writes only while `slot_commit_allowed` (migration 0022) says its slot is
 * still its own (locked FOR KEY SHARE until the commit), or, with no slot
 * naming it, while its lease is live. Race closed: a holder paused past
 * its lease whose slot another attempt took re-arming its lease beside the
 * new holder (one more than `max`), or committing on after it. Used by
 * the writes that re-arm the lease or commit progress outside the
 * statement functions (the moves past a waited item, a sleep, the
 * suspension on new children); those that only give the run up (a wait
 * for a signal or a rate token) need none.
 */
export function slotFence(t: Tables): Sql {
  return sql`(concurrency_key IS NULL
    OR ${t.slotCommitAllowed}(tenant_id, key, owner_token, concurrency_key, locked_until))`;
}

/** The first three arguments of every statement function a run's owner calls: the attempt's fence. */
function fenceOf(own: Ownership): [string, string, string] {
  return [own.tenantId, own.key, own.ownerToken];
}

export interface Advance {
  /** The phase or step that just finished: the new recovery point. */
  readonly name: string;
  readonly attempt: number;
  /** JSON text of the whole state after it. */
  readonly state: string;
  readonly leaseMs: number;
  /** Present when this advance also completes the run. */
  readonly response?: StoredResponse;
}

/**
 * The last arguments of a commit that moves past an item: the state after
 * it, the lease to extend, and the run's outcome, status and body when the
 * commit also completes it (nulls otherwise).
 */
function advanceArgs(adv: Advance): [string, number, string | null, number | null, string | null] {
  const response = adv.response;
  return response
    ? [adv.state, adv.leaseMs, response.outcome, response.status, response.body]
    : [adv.state, adv.leaseMs, null, null, null];
}

/**
 * The fenced move past an item the run waited at (a `.waitFor`, a `.child`
 * or `.map`) and the close of its history entry (fenced by the owner token
 * and, for a run under a concurrency limit, its slot: {@link slotFence}), as the CTEs of a
 * statement's WITH: `advanced` yields the run's `tenant_id` when it moved
 * (the item became the recovery point with `adv.state`, the wait was
 * cleared and the lease extended, or, when the item is the run's last, the
 * run completed with `adv.response`); `closed` yields a row when the item's
 * open entry of `kind` was closed as succeeded, which it is only then.
 */
export function advancePastWaitedItem(t: Tables, own: Ownership, kind: string, adv: Advance): Sql {
  // The run's last item completes it: mark_completed (0014, slot-fenced since 0024), which every completion shares.
  const moved = adv.response
    ? sql`SELECT tenant_id FROM ${markCompleted(t, own.tenantId, own.key, own, adv.response, {
        name: adv.name,
        state: adv.state,
        pastWait: true,
      })}`
    : sql`UPDATE ${t.runs}
      SET recovery_point = ${adv.name}, state = ${adv.state}::json, updated_at = clock_timestamp(),
          wait_kind = NULL, wait_name = NULL, wake_at = NULL, wait_until = NULL,
          locked_until = clock_timestamp() + ${leaseInterval(adv.leaseMs)}
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
        AND owner_token = ${own.ownerToken} AND status = 'in_flight' AND ${slotFence(t)}
      RETURNING tenant_id`;
  return sql`advanced AS (
      ${moved}
    ), closed AS (
      UPDATE ${t.history} SET outcome = 'succeeded', finished_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
        AND kind = ${kind} AND name = ${adv.name} AND outcome = 'started' AND EXISTS (SELECT 1 FROM advanced)
      RETURNING 1
    )`;
}

/**
 * Commit a phase: move the recovery point, store the state, extend the lease
 * and record the phase in the history, in the phase's own transaction, so
 * the business writes and the progress commit or vanish together.
 *
 * Race closed: a zombie attempt (lease expired, key taken over) committing a
 * phase. The UPDATE matches only the current owner token; a zombie matches
 * nothing, the caller raises LeaseLostError, and its transaction rolls back
 * with all its writes. While this UPDATE holds the row lock, a takeover
 * waits and then sees the renewed lease.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function commitPhase(tx: Executor, t: Tables, own: Ownership, adv: Advance): Promise<boolean> {
  // The statement is the function commit_phase of migration 0014 (a cached plan on every driver).
  // The last statement of the phase's transaction: alone in autocommit when the phase wrote nothing.
  return commitAdvance(tx, t, "commit_phase", own, adv, true);
}

/**
 * Call a statement function that moves the recovery point past an item and
 * writes its history entry (a phase's `commit_phase`, a parallel item's
 * `commit_parallel`): both take the attempt's fence, the entry's id, the
 * advance and its completion, in that order. `last` as for `StatementCalls.call`.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function commitAdvance(
  db: Executor,
  t: Tables,
  fn: "commit_phase" | "commit_parallel",
  own: Ownership,
  adv: Advance,
  last: boolean,
): Promise<boolean> {
  const rows = await t.calls.call<{ ok: boolean }>(
    db,
    fn,
    [...fenceOf(own), own.runId, newId(), adv.name, adv.attempt, ...advanceArgs(adv)],
    last,
  );
  return rows[0]?.ok === true;
}

export interface StepStart {
  readonly name: string;
  readonly attempt: number;
  readonly derivedKey: string;
}

/**
 * Record that a step is about to be called, so a later resume knows the call
 * may have reached the other system. Reports how many earlier attempts of
 * this run started the same step without recording a result (in doubt).
 *
 * @returns null when the attempt no longer owns the key.
 */
export async function recordStepStarted(
  db: Executor,
  t: Tables,
  own: Ownership,
  step: StepStart,
): Promise<StartedEntry | null> {
  // The statement is the function record_step_started of migration 0008.
  return recordStarted(db, t, "record_step_started", own, [step.name, step.attempt, step.derivedKey]);
}

/** A new history entry's id, and how many entries of the same item came before it without a result. */
export interface StartedEntry {
  readonly entryId: string;
  readonly priorStarts: number;
}

/**
 * Call a `record_*_started` statement function (a step's, a branch's) for a
 * new history entry: the function takes the attempt's fence and the entry's
 * id first, then `item` (what the entry records of the item), in order.
 *
 * @returns null when the attempt no longer owns the key.
 */
export async function recordStarted(
  db: Executor,
  t: Tables,
  fn: "record_step_started" | "record_branch_started",
  own: Ownership,
  item: readonly unknown[],
): Promise<StartedEntry | null> {
  const entryId = newId();
  const rows = await t.calls.call<{ owned: number; prior_starts: number }>(db, fn, [
    ...fenceOf(own),
    own.runId,
    entryId,
    ...item,
  ]);
  const row = rows[0];
  if (row?.owned !== 1) return null;
  return { entryId, priorStarts: row.prior_starts };
}

/**
 * Record a step's result: advance the recovery point past it, store the
 * state (and, for the last item, the response), and close its history entry
 * with its tries (JSON text of every call, or null for a single one), in one
 * fenced statement.
 *
 * Race closed: a zombie recording a result after another attempt took over.
 * It matches no row and changes nothing; the taker's record stands.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function recordStepResult(
  db: Executor,
  t: Tables,
  own: Ownership,
  entryId: string,
  outcome: "succeeded" | "reconciled",
  adv: Advance,
  tries: string | null,
): Promise<boolean> {
  // The statement is the function record_step_result of migration 0014.
  const rows = await t.calls.call<{ ok: boolean }>(db, "record_step_result", [
    ...fenceOf(own),
    entryId,
    outcome,
    adv.name,
    ...advanceArgs(adv),
    tries,
  ]);
  return rows[0]?.ok === true;
}

/**
 * Complete the run with a response without advancing the recovery point:
 * `ctx.fail`, a stored unknown error, or a workflow with nothing after its
 * last recovery point. Fenced like every other write.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function completeRun(db: Executor, t: Tables, own: Ownership, response: StoredResponse): Promise<boolean> {
  // The statement is the function complete_run of migration 0014.
  const rows = await t.calls.call<{ ok: boolean }>(db, "complete_run", [
    ...fenceOf(own),
    response.outcome,
    response.status,
    response.body,
  ]);
  return rows[0]?.ok === true;
}

/**
 * Record a failed phase or step in the history (the error path only). A
 * step's (or a parallel branch's) open entry is closed, with its tries; a
 * phase, whose transaction rolled back, gets a new entry, and so does a
 * parallel item. Written only while this attempt still owns the key.
 */
export async function recordFailure(
  db: Executor,
  t: Tables,
  own: Ownership,
  failure: {
    kind: "phase" | "step" | "parallel" | "child" | "map" | "sleep" | "wait";
    name: string;
    attempt: number;
    error: string;
    entryId: string | null;
    /** A step's calls as JSON text, or null for a single call. */
    tries?: string | null;
  },
): Promise<void> {
  if (failure.entryId) {
    await sql`
      UPDATE ${t.history} h SET outcome = 'failed', error = ${storableText(failure.error)}, finished_at = clock_timestamp(),
        tries = ${failure.tries ?? null}::json
      FROM ${t.runs} r
      WHERE h.tenant_id = ${own.tenantId} AND h.key = ${own.key} AND h.entry_id = ${failure.entryId}
        AND r.tenant_id = h.tenant_id AND r.key = h.key AND r.owner_token = ${own.ownerToken}
    `.execute(db);
    return;
  }
  await sql`
    INSERT INTO ${t.history} (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, error, started_at, finished_at)
    SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${newId()}, ${failure.kind}, ${failure.name}, ${failure.attempt},
           'failed', ${storableText(failure.error)}, clock_timestamp(), clock_timestamp()
    FROM ${t.runs}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken}
  `.execute(db);
}

/**
 * Delete the claim (`ctx.reject`): only while nothing has committed (no
 * recovery point) and only by its owner, with its history and any signal
 * that arrived early for it (no later run of the key can read them). Refused callers never reach this;
 * only the owner's own reject removes a claim. A child run (of a `.child`
 * or `.map` item) is never deleted: its parent waits for its answer and no
 * client retries it, so the caller ends it with the rejection instead.
 *
 * @returns `deleted`; `child` when the owner's row is a child run (left as it is); `kept` when nothing was
 * deleted (not the owner, or a recovery point exists).
 */
export async function deleteClaim(db: Executor, t: Tables, own: Ownership): Promise<"deleted" | "child" | "kept"> {
  const { rows } = await sql<{ n: number; child: boolean }>`
    WITH gone AS (
      DELETE FROM ${t.runs}
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken}
        AND status = 'in_flight' AND recovery_point IS NULL AND parent_key IS NULL
      RETURNING 1
    ), forget AS (
      DELETE FROM ${t.history} WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND EXISTS (SELECT 1 FROM gone)
    ), forget_signals AS (
      DELETE FROM ${t.signals} WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND EXISTS (SELECT 1 FROM gone)
    )
    SELECT (SELECT count(*) FROM gone)::int AS n,
           EXISTS (
             SELECT 1 FROM ${t.runs}
             WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken}
               AND status = 'in_flight' AND recovery_point IS NULL AND parent_key IS NOT NULL
           ) AS child
  `.execute(db);
  const row = rows[0];
  if ((row?.n ?? 0) === 1) return "deleted";
  return row?.child === true ? "child" : "kept";
}

/**
 * Extend the lease while work continues (the heartbeat). Fenced on the
 * owner token: after a takeover it matches nothing and the attempt learns it
 * has lost the key.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function renewLease(db: Executor, t: Tables, own: Ownership, leaseMs: number): Promise<boolean> {
  // The statement is the function renew_lease of migration 0008.
  const rows = await t.calls.call<{ ok: boolean }>(db, "renew_lease", [...fenceOf(own), leaseMs]);
  return rows[0]?.ok === true;
}

/**
 * Does this attempt still own the key? Asked only on the error path, to tell
 * a zombie's failure (its successor's rows refused its writes) from a real one.
 */
export async function stillOwns(db: Executor, t: Tables, own: Ownership): Promise<boolean> {
  const { rows } = await sql`
    SELECT 1 FROM ${t.runs}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken} AND status = 'in_flight'
  `.execute(db);
  return rows.length === 1;
}
