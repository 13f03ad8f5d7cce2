/** The runners of the items that suspend a run: `.sleep` and `.waitFor`. */
import { UnstorableValueError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import { MAX_STORED_MS } from "../../options/limits.js";
import { completeRun } from "../../store/progress.js";
import type { Executor } from "../../store/run-store.js";
import { discardSignal } from "../../store/signals.js";
import { advancePastWait, checkSignalOrSuspend, lockOwnRun, suspendForSleep } from "../../store/suspension.js";
import type { RunInfo, TimeoutContext } from "../../workflow/context.js";
import { engineTransaction } from "../engine-db.js";
import { FailThrow } from "./control-flow.js";
import type { ItemRun, Outcome } from "./item-run.js";
import {
  advanced,
  completeWithFailure,
  control,
  itemProgress,
  resultOf,
  timedOutResponse,
  withResponse,
} from "./item-run.js";
import type { Plan } from "./plan.js";
import type { RunResult } from "./run-result.js";
import { bodyText, checkWaitPayload, discardReason } from "./values.js";

/** The 202 a suspension answers with: the workflow's `accepted` body, or null. */
export async function suspendedResult(
  plan: Plan,
  info: RunInfo<unknown, unknown>,
  maxBytes: number,
): Promise<RunResult<unknown>> {
  const accepted = plan.def.accepted;
  const where = `accepted of workflow '${plan.def.name}'`;
  const body = accepted ? JSON.parse(bodyText(await accepted(info), where, maxBytes)) : null;
  return { status: 202, body: body as JsonValue, replayed: false, outcome: "suspended" };
}

/**
 * A `.sleep` item: commit the wake-up time with the item as the recovery
 * point and suspend. A duration that is not a whole number of ms in range
 * cannot be stored: the run is parked, as for any value that cannot be stored.
 */
export async function runSleep({ deps, plan, lease, item, info }: ItemRun<"sleep">): Promise<Outcome> {
  const where = `sleep '${item.name}'`;
  const ms =
    typeof item.duration === "function" ? await lease.until(Promise.resolve(item.duration(info))) : item.duration;
  if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0 || ms > MAX_STORED_MS) {
    throw new UnstorableValueError(where, [
      { path: "$", message: `must be an integer number of ms from 0 to ${MAX_STORED_MS}, got ${String(ms)}` },
    ]);
  }
  const result = await suspendedResult(plan, info, deps.maxPayloadBytes);
  lease.finishing();
  const wakeAt = await suspendForSleep(deps.db, deps.tables, plan.own, { name: item.name, attempt: plan.attempt, ms });
  if (!wakeAt) throw lease.lost();
  return { kind: "done", result };
}

/**
 * A `.waitFor` item, in one transaction that locks the run's row first (see
 * `checkSignalOrSuspend` for the race this closes): merge the signal and
 * move on, or suspend, or, past the deadline, let `onTimeout` decide. A
 * stored signal that fails the wait's schema is discarded in the same
 * transaction (with a history entry) and the run waits on, as if it had
 * never come.
 */
export async function runWait(run: ItemRun<"wait">): Promise<Outcome> {
  const { deps, plan, lease, item, info, hook } = run;
  const where = `waitFor '${item.name}'`;
  const advanceWith = async (tx: Executor, value: unknown): Promise<Outcome> => {
    const merged = value === undefined ? null : value;
    const { state, progress } = itemProgress(run, where, { [item.name]: merged }, merged);
    const adv = await withResponse(run, progress, state);
    lease.finishing(adv.response !== undefined);
    if (!(await advancePastWait(tx, deps.tables, plan.own, adv))) throw lease.lost();
    return advanced(adv, state);
  };
  const work = engineTransaction(deps.layer, async (tx): Promise<Outcome | "timed_out"> => {
    if (!(await lockOwnRun(tx, deps.tables, plan.own))) throw lease.lost();
    if (hook) await hook(`locked:wait:${item.name}`);
    lease.finishing();
    const check = { name: item.name, attempt: plan.attempt, timeoutMs: item.options.timeoutMs ?? null };
    let found = await checkSignalOrSuspend(tx, deps.tables, plan.own, check);
    if (found.kind === "signal") {
      const checked = await checkWaitPayload(item, JSON.parse(found.payload) as JsonValue);
      if (checked.ok) return advanceWith(tx, checked.value);
      // Stored unchecked (SQL, an older release): never park on it. Throw it away and wait for the next one.
      const { tenantId, key, runId } = plan.own;
      await discardSignal(tx, deps.tables, {
        tenantId,
        key,
        runId,
        name: item.name,
        fingerprint: found.fingerprint,
        attempt: plan.attempt,
        reason: discardReason(item.name, checked.issues),
      });
      found = await checkSignalOrSuspend(tx, deps.tables, plan.own, { ...check, afterDiscard: true });
    }
    if (found.kind === "lost" || found.kind === "signal") throw lease.lost();
    // A failing `accepted` rolls the suspension back with it.
    if (found.kind === "suspended") {
      return { kind: "done", result: await suspendedResult(plan, info, deps.maxPayloadBytes) };
    }
    return "timed_out";
  });
  const outcome = await lease.until(work);
  if (outcome !== "timed_out") return outcome;
  lease.finishing(false);
  const onTimeout = item.options.onTimeout;
  if (!onTimeout) {
    lease.finishing();
    const response = timedOutResponse(
      "wait_timeout",
      `no signal '${item.name}' arrived within ${item.options.timeoutMs ?? 0} ms`,
    );
    if (!(await completeRun(deps.db, deps.tables, plan.own, response))) throw lease.lost();
    return { kind: "done", result: resultOf(response, false) };
  }
  const ctl = control();
  let value: unknown;
  try {
    value = await lease.until(
      // `reject` is not in the type; it is passed for untyped callers, whom it tells what went wrong.
      Promise.resolve(onTimeout({ ...info, fail: ctl.fail, reject: ctl.reject } as TimeoutContext<unknown, unknown>)),
    );
    ctl.rethrowCaught();
  } catch (error) {
    if (!(error instanceof FailThrow)) throw error;
    return completeWithFailure(run, {
      db: deps.db,
      failure: error,
      item: { kind: "wait", name: item.name, entryId: null },
    });
  }
  return advanceWith(deps.db, value);
}
