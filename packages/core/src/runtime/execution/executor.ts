/**
 * The recovery-point loop (Brandur Leach's rocket-rides-atomic design): from
 * the last committed recovery point, run the next phase or step, commit its
 * result fenced on the owner token, and repeat until the run completes.
 */

import {
  AttemptTimeoutError,
  DatabaseUnavailableError,
  IdempoError,
  LeaseLostError,
  PhaseConflictError,
  UnstorableValueError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "../../errors.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import { deriveStepKey } from "../../keys/derived-key.js";
import { MAX_STORED_MS } from "../../options/limits.js";
import type { Advance } from "../../store/progress.js";
import {
  commitPhase,
  completeRun,
  deleteClaim,
  recordFailure,
  recordStepResult,
  recordStepStarted,
  renewLease,
  stillOwns,
} from "../../store/progress.js";
import type { Executor, StoredResponse } from "../../store/run-store.js";
import { advancePastWait, checkSignalOrSuspend, lockOwnRun, suspendForSleep } from "../../store/suspension.js";
import { swapTraceParent } from "../../store/trace.js";
import { giveUpOwnLease, parkOwnRun } from "../../store/transitions.js";
import type { SpanScope } from "../../telemetry/telemetry.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { RunInfo, TimeoutContext } from "../../workflow/context.js";
import type { Definition, Item } from "../../workflow/definition.js";
import { CrashSignal, FailSignal, RejectSignal } from "./control-flow.js";
import { isConnectionLoss, isTransient } from "./db-errors.js";
import type { LeaseOps } from "./lease-keeper.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { phaseOutbox } from "./phase-outbox.js";
import { inPhaseTransaction } from "./phase-transaction.js";
import type { ExecutorDeps, Plan } from "./plan.js";
import type { RunResult } from "./run-result.js";
import { callStep } from "./step-call.js";
import { stepFailureOf } from "./step-failure.js";
import { bodyText, checkStatus, mergeState, parseSignalPayload } from "./values.js";

/** Transient conflicts are retried up to this many tries... */
const PHASE_TRIES = 20;
/** ...and no longer than this, in ms: on a loaded database five quick tries were not enough. */
const PHASE_RETRY_BUDGET_MS = 10_000;
/** SPEC default of `lockTimeoutMs`. */
const DEFAULT_LOCK_TIMEOUT_MS = 5_000;

type Outcome = { kind: "continue"; state: JsonObject } | { kind: "done"; result: RunResult<unknown> };

/** The fault hook bound to this attempt; absent when none is attached. */
type Hook = (point: string) => void | Promise<void>;

interface OpenStep {
  entryId: string | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What an attempt's lease keeper does against the database, and the item the
 * attempt is at, which the attempt-bound error names.
 */
class AttemptLease implements LeaseOps {
  current: Item | undefined;
  readonly #deps: ExecutorDeps;
  readonly #plan: Plan;

  constructor(deps: ExecutorDeps, plan: Plan) {
    this.#deps = deps;
    this.#plan = plan;
  }

  onLost(): void {
    const { def, own, attempt } = this.#plan;
    this.#deps.telemetry.count("leaseLost", { "idempo.workflow": def.name });
    this.#deps.telemetry.log(
      "warn",
      { workflow: def.name, tenantId: own.tenantId, keyHash: keyHash(own.tenantId, own.key), attempt },
      "idempo: lease lost; another attempt owns the run now, this one stops",
    );
  }

  renew(): Promise<boolean> {
    const deps = this.#deps;
    return deps.silentHeartbeat
      ? Promise.resolve(true)
      : renewLease(deps.db, deps.tables, this.#plan.own, this.#plan.leaseMs);
  }

  giveUp(): Promise<unknown> {
    return giveUpOwnLease(this.#deps.db, this.#deps.tables, this.#plan.own);
  }

  lostError(): LeaseLostError {
    return new LeaseLostError(this.#plan.own.tenantId, this.#plan.own.key, "a fenced write");
  }

  timeoutError(): AttemptTimeoutError {
    const { own, attemptTimeoutMs } = this.#plan;
    const current = this.current;
    return new AttemptTimeoutError(
      own.tenantId,
      own.key,
      attemptTimeoutMs,
      current ? `${current.kind} '${current.name}'` : "respond",
    );
  }
}

/** The run as workflow code sees it, at `state`. */
function runInfo(plan: Plan, state: JsonObject): RunInfo<unknown, unknown> {
  return { input: plan.input, state, key: plan.own.key, tenantId: plan.own.tenantId, attempt: plan.attempt };
}

/** Where the run resumes: the index after the recovery point, checked against the current definition. */
function resumeIndex(plan: Plan): number {
  if (plan.recoveryPoint === null) return 0;
  const idx = plan.def.items.findIndex((i) => i.name === plan.recoveryPoint);
  if (idx < 0) {
    throw new WorkflowDefinitionError(
      `recovery point '${plan.recoveryPoint}' is not in workflow '${plan.def.name}' (items: ${plan.def.items
        .map((i) => i.name)
        .join(", ")}); was it renamed or removed? Deploy the old definition to finish runs started under it`,
    );
  }
  return idx + 1;
}

/** Run a plan to completion (or to the first error, which leaves it at its recovery point). */
export async function execute(deps: ExecutorDeps, plan: Plan): Promise<RunResult<unknown>> {
  const { own } = plan;
  const { telemetry } = deps;
  let recoveryPoint = plan.recoveryPoint;
  let state = plan.state;
  const ops = new AttemptLease(deps, plan);
  const lease = new LeaseKeeper(ops);
  lease.start(deps.heartbeatMs ?? Math.max(1, Math.floor(plan.leaseMs / 3)), plan.attemptTimeoutMs);
  // The history entry of a step that started but has not recorded its result.
  const openStep: OpenStep = { entryId: null };
  const faultHook = deps.hook;
  // Without a fault hook (production) the points are not even named.
  const hook: Hook | undefined = faultHook
    ? (point) => faultHook(point, { tenantId: own.tenantId, key: own.key, attempt: plan.attempt })
    : undefined;
  try {
    const traceparent = plan.span.traceparent();
    if (traceparent) {
      // Only traced attempts pay this statement: the link from a takeover to the attempt it replaced.
      const previous = await swapTraceParent(deps.db, deps.tables, own, traceparent);
      if (previous && plan.attempt > 1) plan.span.link(previous);
    }
    const items = plan.def.items;
    for (let i = resumeIndex(plan); i < items.length; i++) {
      const item = items[i] as Item;
      ops.current = item;
      const last = i === items.length - 1;
      const s = state;
      const attributes = { "idempo.workflow": plan.def.name, "idempo.item": item.name, "idempo.attempt": plan.attempt };
      const metered = telemetry.metered;
      const started = metered ? performance.now() : 0;
      const outcome: Outcome = await telemetry.span(
        `${item.kind} ${item.name}`,
        "internal",
        attributes,
        async (span) => {
          try {
            if (item.kind === "step")
              return await runStep(deps, plan, lease, item, runInfo(plan, s), last, hook, openStep, span);
            if (item.kind === "sleep") return await runSleep(deps, plan, lease, item, runInfo(plan, s));
            if (item.kind === "wait") return await runWait(deps, plan, lease, item, runInfo(plan, s), last, hook);
            if (hook) await hook(`before:phase:${item.name}`);
            return await runPhase(deps, plan, lease, item, runInfo(plan, s), last);
          } finally {
            if (metered) {
              telemetry.duration("phaseDuration", performance.now() - started, {
                "idempo.workflow": plan.def.name,
                "idempo.item": item.name,
                "idempo.item.kind": item.kind,
              });
            }
          }
        },
      );
      if (outcome.kind === "done") {
        // A crash here is "completed, but the client never got the answer": the retry replays.
        if (outcome.result.outcome === "succeeded" || outcome.result.outcome === "suspended") {
          if (hook) await hook(`after:${item.kind}:${item.name}`);
        }
        return outcome.result;
      }
      state = outcome.state;
      recoveryPoint = item.name;
      if (hook) await hook(`after:${item.kind}:${item.name}`);
    }
    // Nothing left after the recovery point (an empty workflow): complete now.
    ops.current = undefined;
    const response = await respondWith(plan.def, runInfo(plan, state));
    lease.finishing();
    if (!(await completeRun(deps.db, deps.tables, own, response))) throw lease.lost();
    return resultOf(response, false);
  } catch (error) {
    const current = ops.current;
    if (error instanceof CrashSignal) throw error;
    if (error instanceof RejectSignal) return reject(deps, plan, error, recoveryPoint, current);
    if (error instanceof LeaseLostError || error instanceof AttemptTimeoutError) throw lease.lost();
    if (isConnectionLoss(error)) throw new DatabaseUnavailableError(error);
    if (error instanceof UnstorableValueError) {
      // No retry can store this value: park the run instead of letting every
      // retry and resumer repeat the same failure (a poison run).
      if (current) await recordItemFailure(deps, plan, current, openStep, error);
      lease.finishing();
      if (!(await parkOwnRun(deps.db, deps.tables, own, error.message))) throw lease.lost();
      telemetry.count("parked", { "idempo.workflow": plan.def.name, "idempo.parked.reason": "unstorable_value" });
      telemetry.log(
        "warn",
        {
          workflow: plan.def.name,
          tenantId: own.tenantId,
          keyHash: keyHash(own.tenantId, own.key),
          reason: error.message,
        },
        "idempo: run parked: a value cannot be stored; fix the code, then unpark it",
      );
      throw error;
    }
    if (!(error instanceof IdempoError)) {
      // A zombie's writes can collide with what its successor committed (a unique
      // constraint): that is a lost lease, not an error of the workflow.
      if (!(await stillOwns(deps.db, deps.tables, own).catch(() => true))) throw lease.lost();
      if (current) await recordItemFailure(deps, plan, current, openStep, error);
      // A step error its `retryable` accepted is transient (a provider's "key in use" conflict): never final.
      if (plan.def.options.onUnknownError === "store" && !stepFailureOf(error)?.retryable)
        return storeUnknownError(deps, plan, lease);
    }
    throw error;
  } finally {
    lease.stop();
  }
}

/** Close the failing item's history entry; best effort, on the error path only. */
async function recordItemFailure(
  deps: ExecutorDeps,
  plan: Plan,
  item: Item,
  openStep: OpenStep,
  error: unknown,
): Promise<void> {
  await recordFailure(deps.db, deps.tables, plan.own, {
    kind: item.kind,
    name: item.name,
    attempt: plan.attempt,
    error: error instanceof Error ? error.message : String(error),
    entryId: openStep.entryId,
  }).catch(() => undefined);
}

async function reject(
  deps: ExecutorDeps,
  plan: Plan,
  signal: RejectSignal,
  recoveryPoint: string | null,
  current: Item | undefined,
): Promise<RunResult<unknown>> {
  const where = current ? `${current.kind} '${current.name}'` : "respond";
  // A wait only times out after it suspended, which committed (the caller had its 202).
  if (current?.kind === "wait") {
    throw new WorkflowUsageError(
      `ctx.reject called in onTimeout of waitFor '${current.name}' of workflow '${plan.def.name}': ` +
        "the run suspended there, which committed, so there is no claim left to refuse. " +
        "Use ctx.fail to store a final response instead",
    );
  }
  if (recoveryPoint !== null) {
    throw new WorkflowUsageError(
      `ctx.reject called in ${where} of workflow '${plan.def.name}' after '${recoveryPoint}' committed; ` +
        "reject is only allowed before anything commits. Use ctx.fail to store a final response instead",
    );
  }
  const status = checkStatus(signal.status, `ctx.reject in ${where}`);
  const body = JSON.parse(bodyText(signal.body, `ctx.reject in ${where}`)) as JsonValue;
  if (!(await deleteClaim(deps.db, deps.tables, plan.own))) {
    throw new LeaseLostError(plan.own.tenantId, plan.own.key, "ctx.reject");
  }
  return { status, body, replayed: false, outcome: "rejected" };
}

async function storeUnknownError(deps: ExecutorDeps, plan: Plan, lease: LeaseKeeper): Promise<RunResult<unknown>> {
  const response: StoredResponse = {
    outcome: "errored",
    status: 500,
    body: JSON.stringify({
      type: "about:blank",
      title: "Internal Server Error",
      status: 500,
      code: "internal_error",
    }),
  };
  lease.finishing();
  if (!(await completeRun(deps.db, deps.tables, plan.own, response))) throw lease.lost();
  return resultOf(response, false);
}

/** The response a run stores: `respond`'s, checked and turned into its stored JSON text. */
async function respondWith(def: Definition, info: RunInfo<unknown, unknown>): Promise<StoredResponse> {
  const spec = await def.respond(info);
  const status = checkStatus(spec?.status, `respond of workflow '${def.name}'`);
  return { outcome: "succeeded", status, body: bodyText(spec.body, `respond of workflow '${def.name}'`) };
}

/**
 * `ctx.fail`: close the phase's or step's history entry as failed and
 * complete the run with the stored response, fenced like every write.
 */
async function completeWithFailure(
  db: Executor,
  deps: ExecutorDeps,
  plan: Plan,
  lease: LeaseKeeper,
  signal: FailSignal,
  item: { kind: Item["kind"]; name: string; entryId: string | null },
): Promise<Outcome> {
  const where = `ctx.fail in ${item.kind} '${item.name}'`;
  const response: StoredResponse = {
    outcome: "failed",
    status: checkStatus(signal.status, where),
    body: bodyText(signal.body, where),
  };
  await recordFailure(db, deps.tables, plan.own, {
    ...item,
    attempt: plan.attempt,
    error: `ctx.fail(${response.status})`,
  });
  lease.finishing();
  if (!(await completeRun(db, deps.tables, plan.own, response))) throw lease.lost();
  return { kind: "done", result: resultOf(response, false) };
}

/** What the caller gets: the body through the same JSON round trip a replay uses. */
function resultOf(response: StoredResponse, replayed: boolean): RunResult<unknown> {
  const body = JSON.parse(response.body) as JsonValue;
  return { status: response.status, body, replayed, outcome: response.outcome } as RunResult<unknown>;
}

/**
 * `fail` and `reject` throw; they also remember the first call, so workflow
 * code that catches the throw cannot turn a declined card into a success.
 */
function control() {
  let signal: FailSignal | RejectSignal | undefined;
  return {
    fail(status: number, body: unknown): never {
      signal ??= new FailSignal(status, body);
      throw signal;
    },
    reject(status: number, body: unknown): never {
      signal ??= new RejectSignal(status, body);
      throw signal;
    },
    /** Rethrow a fail/reject that user code caught and swallowed. */
    rethrowCaught(): void {
      if (signal) throw signal;
    },
  };
}

async function runPhase(
  deps: ExecutorDeps,
  plan: Plan,
  lease: LeaseKeeper,
  item: Extract<Item, { kind: "phase" }>,
  info: RunInfo<unknown, unknown>,
  last: boolean,
): Promise<Outcome> {
  const where = `phase '${item.name}'`;
  // An integer checked by the builder: safe to write into the SET statement.
  const lockTimeout = Math.trunc(plan.def.options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
  const started = Date.now();
  for (let tries = 1; ; tries++) {
    try {
      // Every row-lock wait of this phase is bounded by lock_timeout (a stalled attempt may hold the rows it
      // needs); the transaction begins, with that setting, on the phase's first statement.
      const work = inPhaseTransaction(deps.phaseDb, lockTimeout, async ({ tx, committer }): Promise<Outcome> => {
        let result: unknown;
        try {
          const ctl = control();
          // Spelt out, not spread from `info`: a literal is made many times faster.
          result = await item.run({
            input: info.input,
            state: info.state,
            key: info.key,
            tenantId: info.tenantId,
            attempt: info.attempt,
            fail: ctl.fail,
            reject: ctl.reject,
            tx,
            outbox: phaseOutbox(deps, plan, item.name, tx),
          });
          ctl.rethrowCaught();
        } catch (error) {
          if (!(error instanceof FailSignal)) throw error;
          // Writes the phase made before ctx.fail commit with the stored response.
          return completeWithFailure(tx, deps, plan, lease, error, { kind: "phase", name: item.name, entryId: null });
        }
        const state = mergeState(info.state as JsonObject, result, where);
        const advance: Advance = {
          name: item.name,
          attempt: plan.attempt,
          state: JSON.stringify(state),
          leaseMs: plan.leaseMs,
          ...(last ? { response: await respondWith(plan.def, runInfo(plan, state)) } : {}),
        };
        if (advance.response) lease.finishing();
        // A phase that never used tx commits its recovery point alone, in autocommit.
        if (!(await commitPhase(committer(), deps.tables, plan.own, advance))) throw lease.lost();
        return advance.response
          ? { kind: "done", result: resultOf(advance.response, false) }
          : { kind: "continue", state };
      });
      // A phase whose code hangs with its transaction open must not hold the attempt past its bound.
      return await lease.until(work);
    } catch (error) {
      if (!isTransient(error)) throw error;
      const elapsed = Date.now() - started;
      if (tries >= PHASE_TRIES || elapsed >= PHASE_RETRY_BUDGET_MS) {
        throw new PhaseConflictError(item.name, tries, elapsed, error);
      }
      // Serialization failure, deadlock or lock timeout: the transaction rolled back whole; try again after a jittered pause.
      await sleep(Math.random() * Math.min(500, 20 * 2 ** tries));
    }
  }
}

async function runStep(
  deps: ExecutorDeps,
  plan: Plan,
  lease: LeaseKeeper,
  item: Extract<Item, { kind: "step" }>,
  info: RunInfo<unknown, unknown>,
  last: boolean,
  hook: Hook | undefined,
  openStep: OpenStep,
  span: SpanScope,
): Promise<Outcome> {
  const where = `step '${item.name}'`;
  const idempotencyKey = deriveStepKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name);
  if (span.recording) span.set({ "idempo.step.derived_key.hash": keyHash(plan.own.tenantId, idempotencyKey) });
  const started = await recordStepStarted(deps.db, deps.tables, plan.own, {
    name: item.name,
    attempt: plan.attempt,
    derivedKey: idempotencyKey,
  });
  if (!started) throw lease.lost();
  openStep.entryId = started.entryId;
  span.set({ "idempo.step.in_doubt": started.priorStarts > 0 });
  if (hook) await hook(`before:step:${item.name}`);
  let result: unknown;
  let outcome: "succeeded" | "reconciled" = "succeeded";
  try {
    const reconcile = item.options.reconcile;
    if (started.priorStarts > 0 && reconcile) {
      // In doubt: an earlier attempt may have reached the other system. Ask before calling again.
      result = await lease.until(Promise.resolve(reconcile({ ...info, idempotencyKey, signal: lease.signal })));
      if (result !== undefined) outcome = "reconciled";
    }
    if (outcome === "succeeded") {
      const ctl = control();
      let retries = 0;
      const onRetry = () => {
        retries++;
        span.set({ "idempo.step.retries": retries });
        deps.telemetry.count("stepRetries", { "idempo.workflow": plan.def.name, "idempo.item": item.name });
      };
      result = await lease.until(
        callStep(item, info, ctl, idempotencyKey, lease, onRetry, {
          workflow: plan.def.name,
          step: item.name,
          tenantId: plan.own.tenantId,
          key: plan.own.key,
          attempt: plan.attempt,
        }),
      );
      ctl.rethrowCaught();
    }
  } catch (error) {
    if (!(error instanceof FailSignal)) throw error;
    openStep.entryId = null;
    return completeWithFailure(deps.db, deps, plan, lease, error, {
      kind: "step",
      name: item.name,
      entryId: started.entryId,
    });
  }
  openStep.entryId = null;
  span.set({ "idempo.step.reconciled": outcome === "reconciled" });
  if (hook) await hook(`called:step:${item.name}`);
  const state = mergeState(info.state as JsonObject, result, where);
  const progress: Advance = {
    name: item.name,
    attempt: plan.attempt,
    state: JSON.stringify(state),
    leaseMs: plan.leaseMs,
  };
  let response: StoredResponse | undefined;
  try {
    if (last) response = await respondWith(plan.def, runInfo(plan, state));
  } catch (error) {
    // The call happened: keep its result even though respond failed, so a retry does not call again.
    if (!(await recordStepResult(deps.db, deps.tables, plan.own, started.entryId, outcome, progress)))
      throw lease.lost();
    throw error;
  }
  const advance: Advance = response ? { ...progress, response } : progress;
  if (response) lease.finishing();
  if (!(await recordStepResult(deps.db, deps.tables, plan.own, started.entryId, outcome, advance))) throw lease.lost();
  return advance.response ? { kind: "done", result: resultOf(advance.response, false) } : { kind: "continue", state };
}

/** The 202 a suspension answers with: the workflow's `accepted` body, or null. */
async function suspendedResult(plan: Plan, info: RunInfo<unknown, unknown>): Promise<RunResult<unknown>> {
  const accepted = plan.def.accepted;
  const body = accepted ? JSON.parse(bodyText(await accepted(info), `accepted of workflow '${plan.def.name}'`)) : null;
  return { status: 202, body: body as JsonValue, replayed: false, outcome: "suspended" };
}

/**
 * A `.sleep` item: commit the wake-up time with the item as the recovery
 * point and suspend. A duration that is not a whole number of ms in range
 * cannot be stored: the run is parked, as for any value that cannot be stored.
 */
async function runSleep(
  deps: ExecutorDeps,
  plan: Plan,
  lease: LeaseKeeper,
  item: Extract<Item, { kind: "sleep" }>,
  info: RunInfo<unknown, unknown>,
): Promise<Outcome> {
  const where = `sleep '${item.name}'`;
  const ms =
    typeof item.duration === "function" ? await lease.until(Promise.resolve(item.duration(info))) : item.duration;
  if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0 || ms > MAX_STORED_MS) {
    throw new UnstorableValueError(where, [
      { path: "$", message: `must be an integer number of ms from 0 to ${MAX_STORED_MS}, got ${String(ms)}` },
    ]);
  }
  const result = await suspendedResult(plan, info);
  lease.finishing();
  const wakeAt = await suspendForSleep(deps.db, deps.tables, plan.own, { name: item.name, attempt: plan.attempt, ms });
  if (!wakeAt) throw lease.lost();
  return { kind: "done", result };
}

/** The stored answer of a wait that timed out with no `onTimeout` (RFC 9457 problem details). */
function waitTimeoutResponse(name: string, timeoutMs: number | undefined): StoredResponse {
  return {
    outcome: "failed",
    status: 408,
    body: JSON.stringify({
      type: "about:blank",
      title: "Request Timeout",
      status: 408,
      code: "wait_timeout",
      detail: `no signal '${name}' arrived within ${timeoutMs ?? 0} ms`,
    }),
  };
}

/**
 * A `.waitFor` item, in one transaction that locks the run's row first (see
 * `checkSignalOrSuspend` for the race this closes): merge the signal and
 * move on, or suspend, or, past the deadline, let `onTimeout` decide.
 */
async function runWait(
  deps: ExecutorDeps,
  plan: Plan,
  lease: LeaseKeeper,
  item: Extract<Item, { kind: "wait" }>,
  info: RunInfo<unknown, unknown>,
  last: boolean,
  hook: Hook | undefined,
): Promise<Outcome> {
  const where = `waitFor '${item.name}'`;
  const advanceWith = async (tx: Executor, value: unknown): Promise<Outcome> => {
    const state = mergeState(info.state as JsonObject, { [item.name]: value === undefined ? null : value }, where);
    const adv: Advance = {
      name: item.name,
      attempt: plan.attempt,
      state: JSON.stringify(state),
      leaseMs: plan.leaseMs,
      ...(last ? { response: await respondWith(plan.def, runInfo(plan, state)) } : {}),
    };
    lease.finishing(adv.response !== undefined);
    if (!(await advancePastWait(tx, deps.tables, plan.own, adv))) throw lease.lost();
    return adv.response ? { kind: "done", result: resultOf(adv.response, false) } : { kind: "continue", state };
  };
  const work = deps.db.transaction().execute(async (tx): Promise<Outcome | "timed_out"> => {
    if (!(await lockOwnRun(tx, deps.tables, plan.own))) throw lease.lost();
    if (hook) await hook(`locked:wait:${item.name}`);
    lease.finishing();
    const found = await checkSignalOrSuspend(tx, deps.tables, plan.own, {
      name: item.name,
      attempt: plan.attempt,
      timeoutMs: item.options.timeoutMs ?? null,
    });
    if (found.kind === "lost") throw lease.lost();
    // A failing `accepted` rolls the suspension back with it.
    if (found.kind === "suspended") return { kind: "done", result: await suspendedResult(plan, info) };
    if (found.kind === "timed_out") return "timed_out";
    const payload = await parseSignalPayload(item, JSON.parse(found.payload) as JsonValue, where);
    return advanceWith(tx, payload);
  });
  const outcome = await lease.until(work);
  if (outcome !== "timed_out") return outcome;
  lease.finishing(false);
  const onTimeout = item.options.onTimeout;
  if (!onTimeout) {
    lease.finishing();
    const response = waitTimeoutResponse(item.name, item.options.timeoutMs);
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
    if (!(error instanceof FailSignal)) throw error;
    return completeWithFailure(deps.db, deps, plan, lease, error, { kind: "wait", name: item.name, entryId: null });
  }
  return advanceWith(deps.db, value);
}
