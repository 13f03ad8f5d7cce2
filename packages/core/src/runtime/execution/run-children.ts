/**
 * The runner of a `.child` or `.map` item. On the first visit the
 * children's inputs are computed and checked, and the children are created
 * (keys derived from the parent) in the transaction that records the
 * item's start; in the same transaction the parent suspends, holding no
 * owner and no lease. The completing transaction of the last child makes
 * the parent due again (trigger of migration 0020); taken again, the
 * parent reaches the item once more, finds every child completed and moves
 * past it with their responses, in input order. Past `timeoutMs` the item
 * fails for good: the parent completes with a stored 408, then its
 * children that have not completed are canceled. The user's callbacks
 * (`inputs`, `accepted`, `respond`) all run before the parent's row is
 * locked, so an operator's cancel never waits for them.
 */
import { InputValidationError, UnstorableValueError, WorkflowUsageError } from "../../errors.js";
import { newId } from "../../ids.js";
import { canonicalJson, fingerprintOf } from "../../json/fingerprint.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import { checkPayloadSize } from "../../json/payload-size.js";
import { deriveChildKey } from "../../keys/derived-key.js";
import { MAX_CHILDREN } from "../../options/limits.js";
import { cancelChildren, PARENT_ENDED } from "../../store/child-cancel.js";
import type { ChildRow, ChildrenStart, ParentItem } from "../../store/children.js";
import {
  advancePastChildren,
  childrenOf,
  failChildrenTimeout,
  lockForChildren,
  startChildren,
  suspendForChildren,
} from "../../store/children.js";
import type { Advance } from "../../store/progress.js";
import type { StoredResponse } from "../../store/run-store.js";
import { tombstoneMsOf } from "../engine-context.js";
import { engineTransaction } from "../engine-db.js";
import type { ItemRun, Outcome } from "./item-run.js";
import { advanced, itemProgress, resultOf, timedOutResponse, withResponse } from "./item-run.js";
import type { RunResult } from "./run-result.js";
import { suspendedResult } from "./run-suspension.js";
import { inputToJson, parsedInputHash, parseInput } from "./values.js";

type ChildItemRun = ItemRun<"child" | "map">;

/** The answer a parent stores when its children did not complete within `timeoutMs`. */
function timeoutResponse(kind: string, name: string, timeoutMs: number | undefined): StoredResponse {
  return timedOutResponse(
    "children_timeout",
    `the children of ${kind} '${name}' did not complete within ${timeoutMs ?? 0} ms; those still running were canceled`,
  );
}

/**
 * What the item will do once the parent's row is locked, and the user's
 * callbacks it needs, called before the lock: the 202 of `accepted` when
 * some child has not completed, or the move past the item (with `respond`
 * when it is the last) computed from the completed children `seen`.
 */
type Prepared =
  | { readonly kind: "suspend"; readonly result: RunResult<unknown> }
  | { readonly kind: "move_on"; readonly seen: readonly ChildRow[]; readonly adv: Advance; readonly state: JsonObject };

/** A `.child` or `.map` item: start the children, or wait for them, or move past them. */
export async function runChildren(run: ChildItemRun): Promise<Outcome> {
  const { deps, plan, lease, item, hook } = run;
  const parent: ParentItem = { tenantId: plan.own.tenantId, key: plan.own.key, runId: plan.own.runId, item: item.name };
  // The inputs are computed once: only when the item has no children yet (a resume finds them).
  const known = await childrenOf(deps.db, deps.tables, parent);
  const start = known.length === 0 ? await planChildren(run) : undefined;
  // User code runs here, never under the parent's row lock, so a cancel of the parent does not wait for it; a
  // cancel that lands meanwhile makes the transaction's first statement find no owner, and nothing is written.
  const prepared = await lease.until(prepare(run, known, start?.children.length ?? 0));
  const work = engineTransaction(deps.layer, async (tx): Promise<Outcome | "timed_out" | "again"> => {
    const locked = await lockForChildren(tx, deps.tables, plan.own, item.name);
    if (!locked) throw lease.lost();
    if (start) {
      await startChildren(tx, deps.tables, plan.own, item.name, start);
      if (hook) await hook(`started:${item.kind}:${item.name}`);
    }
    // Read under the parent's lock: a child completing now waits for it, then sees the suspension.
    const children = await childrenOf(tx, deps.tables, parent);
    if (start && children.length !== start.children.length) throw keyTaken(run, start, children);
    if (hook) await hook(`read:${item.kind}:${item.name}`);
    if (children.every((c) => c.status === "completed")) {
      // A child completed (or was run again) since the read `prepared` was made from: prepare again.
      if (prepared.kind !== "move_on" || JSON.stringify(prepared.seen) !== JSON.stringify(children)) return "again";
      lease.finishing(prepared.adv.response !== undefined);
      if (!(await advancePastChildren(tx, deps.tables, plan.own, item.kind, prepared.adv))) throw lease.lost();
      return advanced(prepared.adv, prepared.state);
    }
    if (locked.timedOut) return "timed_out";
    if (prepared.kind !== "suspend") return "again";
    lease.finishing();
    const wait = { item: item.name, timeoutMs: item.options.timeoutMs ?? null };
    if (!(await suspendForChildren(tx, deps.tables, plan.own, wait))) throw lease.lost();
    return { kind: "done", result: prepared.result };
  });
  const outcome = await lease.until(work);
  if (outcome === "again") return runChildren(run);
  if (outcome !== "timed_out") return outcome;
  lease.finishing();
  const response = timeoutResponse(item.kind, item.name, item.options.timeoutMs);
  if (!(await failChildrenTimeout(deps.db, deps.tables, plan.own, item.kind, item.name, response))) {
    throw lease.lost();
  }
  // After the parent's commit, never under its lock; a crash before this is repaired by the sweeper.
  await cancelChildren(deps.db, deps.tables, plan.own, PARENT_ENDED);
  return { kind: "done", result: resultOf(response, false) };
}

/**
 * The item's next move as the children read before the lock (`known`, or
 * `made` new ones about to be created) show it, with the user's callbacks
 * it calls: `accepted` for a suspension (a failing one writes nothing),
 * `respond` for a move past the last item.
 */
async function prepare(run: ChildItemRun, known: readonly ChildRow[], made: number): Promise<Prepared> {
  const { deps, plan, info } = run;
  if (made > 0 || !known.every((c) => c.status === "completed")) {
    return { kind: "suspend", result: await suspendedResult(plan, info, deps.maxPayloadBytes) };
  }
  return { kind: "move_on", seen: known, ...(await moveOn(run, known)) };
}

/**
 * Some derived child key already names another run (a child of an earlier
 * run of this key that has not completed yet, say): the item cannot start
 * its children now. Thrown, so the run stays in flight for a later attempt.
 */
function keyTaken(run: ChildItemRun, start: ChildrenStart, made: readonly ChildRow[]): WorkflowUsageError {
  const have = new Set(made.map((c) => c.key));
  const taken = start.children.find((c) => !have.has(c.key))?.key ?? "?";
  return new WorkflowUsageError(
    `${run.item.kind} '${run.item.name}' of workflow '${run.plan.def.name}' cannot start its children: the key ` +
      `'${taken}' already names another run (a child of an earlier run of this key, still running?); ` +
      "the next attempt tries again",
  );
}

/** Every child completed: their responses into state under the item's name, as the item's commit writes it. */
async function moveOn(
  run: ChildItemRun,
  children: readonly ChildRow[],
): Promise<{ readonly adv: Advance; readonly state: JsonObject }> {
  const { item } = run;
  const results = children.map((c) => ({
    status: c.responseStatus ?? 500,
    body: JSON.parse(c.responseBody ?? "null") as JsonValue,
    outcome: c.outcome ?? "succeeded",
  }));
  const value = item.kind === "map" ? results : (results[0] ?? null);
  const { state, progress } = itemProgress(run, `${item.kind} '${item.name}'`, { [item.name]: value }, value);
  return { adv: await withResponse(run, progress, state), state };
}

/**
 * The children to create: the item's inputs (one for `.child`, the array
 * of `.map`), each checked as `enqueue` checks a request (JSON, size, the
 * child workflow's schema), under keys derived from the parent.
 *
 * @throws UnstorableValueError when the inputs are not an array (`map`), are more than MAX_CHILDREN, or one fails
 * its checks: no retry can start that child, so the parent is parked.
 */
async function planChildren(run: ChildItemRun): Promise<ChildrenStart> {
  const { deps, plan, lease, item, info } = run;
  const where = `${item.kind} '${item.name}' of workflow '${plan.def.name}'`;
  const given = await lease.until(Promise.resolve(item.inputs(info)));
  if (item.kind === "map" && !Array.isArray(given)) {
    throw new UnstorableValueError(`the inputs function of ${where}`, [
      { path: "$", message: `must be an array of the children's inputs, got ${typeof given}` },
    ]);
  }
  const inputs: readonly unknown[] = item.kind === "map" ? (given as unknown[]) : [given];
  if (inputs.length > MAX_CHILDREN) {
    throw new UnstorableValueError(`the inputs function of ${where}`, [
      { path: "$", message: `must hold at most ${MAX_CHILDREN} children's inputs, got ${inputs.length}` },
    ]);
  }
  const child = item.child;
  const children = [];
  for (const [i, input] of inputs.entries()) {
    const what = `the input of child ${i} of ${where}`;
    try {
      const json = inputToJson(input);
      const canonical = canonicalJson(json);
      checkPayloadSize(what, canonical, deps.maxPayloadBytes);
      const parsed = await parseInput(child, json);
      children.push({
        key: deriveChildKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name, i),
        runId: newId(),
        fingerprint: fingerprintOf(child.name, canonical),
        input: JSON.stringify(json),
        parsedInputHash: child.schema ? parsedInputHash(parsed) : null,
      });
    } catch (error) {
      if (error instanceof InputValidationError) throw new UnstorableValueError(what, error.issues);
      throw error;
    }
  }
  return {
    kind: item.kind,
    attempt: plan.attempt,
    workflow: child.name,
    outline: child.outline,
    definitionHash: child.hash,
    workflowVersion: child.version,
    retentionMs: child.options.retentionMs ?? deps.retentionMs,
    tombstoneMs: tombstoneMsOf(child),
    priority: child.options.priority ?? null,
    runnable: item.options.concurrency ?? Math.max(inputs.length, 1),
    children,
  };
}
