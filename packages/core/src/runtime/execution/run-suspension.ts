/** The runners of the items that suspend a run: `.sleep` and `.waitFor`. */
import { UnstorableValueError } from "../../errors.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import { MAX_STORED_MS } from "../../options/limits.js";
import type { Advance } from "../../store/progress.js";
import { completeRun } from "../../store/progress.js";
import { discardSignal } from "../../store/signals.js";
import type { WaitView } from "../../store/suspension.js";
import {
  advancePastWait,
  checkSignalOrSuspend,
  lockOwnRun,
  readWait,
  suspendForSleep,
} from "../../store/suspension.js";
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
 * What the wait's transaction will do, prepared from a read of the wait
 * made before it locks the run's row, with the user's code it needs run
 * then: the schema check of the stored signal, and `respond` for a move
 * past the last item, or `accepted` for a suspension (unless the wait is
 * already past its deadline, when no 202 is needed). `fingerprint` is the
 * signal the read found, which the transaction must find too.
 */
type PreparedWait =
  | { readonly kind: "signal"; readonly fingerprint: string; readonly adv: Advance; readonly state: JsonObject }
  | { readonly kind: "discard"; readonly fingerprint: string; readonly reason: string; readonly accepted?: Accepted }
  | { readonly kind: "none"; readonly accepted?: Accepted };

/** `accepted`'s 202, or what it threw: thrown only if the wait does suspend (a failing one writes nothing). */
type Accepted =
  | { readonly ok: true; readonly result: RunResult<unknown> }
  | { readonly ok: false; readonly error: unknown };

/**
 * Rounds of "read, run the callbacks, lock, find the read still holds": a
 * signal that arrives (or is replaced) in between costs one more. Past
 * this the attempt gives the run up, and it is taken again once its lease
 * has run out.
 */
const MAX_WAIT_ROUNDS = 5;

/**
 * A `.waitFor` item, in one transaction that locks the run's row first (see
 * `checkSignalOrSuspend` for the race this closes): merge the signal and
 * move on, or suspend, or, past the deadline, let `onTimeout` decide. A
 * stored signal that fails the wait's schema is discarded in the same
 * transaction (with a history entry) and the run waits on, as if it had
 * never come. The user's code (the schema, `respond`, `accepted`) runs
 * before that transaction, on what a read of the wait found, so an
 * operator's cancel never waits for it; the transaction checks that it
 * finds the same, and goes round once more when a signal came in between.
 */
export async function runWait(run: ItemRun<"wait">): Promise<Outcome> {
  const { deps, plan, lease, item, info, hook } = run;
  const check = { name: item.name, attempt: plan.attempt, timeoutMs: item.options.timeoutMs ?? null };
  let work: Outcome | "timed_out" | "again" = "again";
  for (let round = 1; work === "again"; round++) {
    if (round > MAX_WAIT_ROUNDS) throw lease.lost();
    const seen = await readWait(deps.db, deps.tables, plan.own, item.name);
    if (!seen) throw lease.lost();
    // A cancel that lands while this runs makes the transaction's first statement find no owner.
    const prepared = await lease.until(prepareWait(run, seen));
    work = await lease.until(
      engineTransaction(deps.layer, async (tx): Promise<Outcome | "timed_out" | "again"> => {
        if (!(await lockOwnRun(tx, deps.tables, plan.own))) throw lease.lost();
        if (hook) await hook(`locked:wait:${item.name}`);
        if (prepared.kind === "signal") {
          // The signal the callbacks ran on must be the one stored now (a delivery may have replaced it).
          const now = await readWait(tx, deps.tables, plan.own, item.name);
          if (!now) throw lease.lost();
          if (now.signal?.fingerprint !== prepared.fingerprint) return "again";
          lease.finishing(prepared.adv.response !== undefined);
          if (!(await advancePastWait(tx, deps.tables, plan.own, prepared.adv))) throw lease.lost();
          return advanced(prepared.adv, prepared.state);
        }
        const discarding = prepared.kind === "discard";
        if (discarding) {
          // Stored unchecked (SQL, an older release): never park on it. Throw it away and wait for the next one;
          // gone already (a delivery replaced it), nothing is written and the callbacks run on what is there now.
          const { tenantId, key, runId } = plan.own;
          const unusable = { tenantId, key, runId, name: item.name, fingerprint: prepared.fingerprint };
          const reason = prepared.reason;
          if (!(await discardSignal(tx, deps.tables, { ...unusable, attempt: plan.attempt, reason }))) return "again";
        }
        lease.finishing();
        const found = await checkSignalOrSuspend(tx, deps.tables, plan.own, { ...check, afterDiscard: discarding });
        if (found.kind === "timed_out") return "timed_out";
        if (found.kind === "signal" && !discarding) {
          // It came after the read the callbacks ran on (no write was made): run them on it.
          lease.finishing(false);
          return "again";
        }
        // A suspension without its 202 (the read found the deadline passed, and the database clock went back since):
        // rolled back, and the attempt gives the run up.
        if (found.kind !== "suspended" || !prepared.accepted) throw lease.lost();
        // A failing `accepted` rolls the suspension back with it.
        if (!prepared.accepted.ok) throw prepared.accepted.error;
        return { kind: "done", result: prepared.accepted.result };
      }),
    );
  }
  if (work !== "timed_out") return work;
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
  const { adv, state } = await waited(run, value);
  lease.finishing(adv.response !== undefined);
  if (!(await advancePastWait(deps.db, deps.tables, plan.own, adv))) throw lease.lost();
  return advanced(adv, state);
}

/** The move past the wait with `value` (the signal's checked payload, or `onTimeout`'s) merged into state. */
async function waited(run: ItemRun<"wait">, value: unknown): Promise<{ adv: Advance; state: JsonObject }> {
  const merged = value === undefined ? null : value;
  const { state, progress } = itemProgress(run, `waitFor '${run.item.name}'`, { [run.item.name]: merged }, merged);
  return { adv: await withResponse(run, progress, state), state };
}

/** Run the wait's user code on `seen`, the wait as read before its transaction; see {@link PreparedWait}. */
async function prepareWait(run: ItemRun<"wait">, seen: WaitView): Promise<PreparedWait> {
  const { item } = run;
  if (!seen.signal) return { kind: "none", ...(seen.due ? {} : { accepted: await acceptedOf(run) }) };
  const { fingerprint } = seen.signal;
  const checked = await checkWaitPayload(item, JSON.parse(seen.signal.payload) as JsonValue);
  if (checked.ok) return { kind: "signal", fingerprint, ...(await waited(run, checked.value)) };
  const reason = discardReason(item.name, checked.issues);
  return { kind: "discard", fingerprint, reason, ...(seen.dueAfterDiscard ? {} : { accepted: await acceptedOf(run) }) };
}

/** `accepted`'s 202 for a suspension at the wait, or the error it failed with. */
async function acceptedOf({ deps, plan, info }: ItemRun<"wait">): Promise<Accepted> {
  try {
    return { ok: true, result: await suspendedResult(plan, info, deps.maxPayloadBytes) };
  } catch (error) {
    return { ok: false, error };
  }
}
