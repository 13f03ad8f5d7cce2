/**
 * The recovery-point loop (Brandur Leach's rocket-rides-atomic design): from
 * the last committed recovery point, run the next phase or step, commit its
 * result fenced on the owner token, and repeat until the run completes. Each
 * kind of item has its runner (`run-phase.ts`, `run-step.ts`,
 * `run-parallel.ts`, `run-suspension.ts`); this file holds the loop and its error paths.
 */
import { DatabaseUnavailableError } from "../../database-errors.js";
import {
  AttemptTimeoutError,
  IdempoError,
  LeaseLostError,
  PayloadTooLargeError,
  UnstorableValueError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import { completeRun, deleteClaim, recordFailure, stillOwns } from "../../store/progress.js";
import type { StoredResponse } from "../../store/run-store.js";
import { swapTraceParent } from "../../store/trace.js";
import { parkOwnRun } from "../../store/transitions.js";
import type { SpanScope } from "../../telemetry/telemetry.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { RunInfo } from "../../workflow/context.js";
import type { Item } from "../../workflow/definition.js";
import { AttemptLease } from "./attempt-lease.js";
import { CrashSignal, RejectThrow } from "./control-flow.js";
import { inDoubt, isConnectionLoss } from "./db-errors.js";
import type { AttemptScope, Hook, ItemRun, OpenStep, Outcome } from "./item-run.js";
import { respondWith, resultOf, runInfo } from "./item-run.js";
import { LeaseKeeper } from "./lease-keeper.js";
import type { ExecutorDeps, Plan } from "./plan.js";
import { runChildren } from "./run-children.js";
import { runParallel } from "./run-parallel.js";
import { runPhase } from "./run-phase.js";
import type { RunResult } from "./run-result.js";
import { runStep } from "./run-step.js";
import { runSleep, runWait } from "./run-suspension.js";
import { stepFailureOf } from "./step-failure.js";
import { bodyText, checkStatus } from "./values.js";

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

/** The argument of an item's runner, as one literal (not spreads of the scope: one object per item, not two). */
function itemRun<K extends Item["kind"]>(
  scope: AttemptScope,
  item: Extract<Item, { kind: K }>,
  info: RunInfo<unknown, unknown>,
  last: boolean,
  openStep: OpenStep,
  span: SpanScope,
): ItemRun<K> {
  const { deps, plan, lease, hook } = scope;
  return { deps, plan, lease, hook, item, info, last, openStep, span };
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
  const openStep: OpenStep = { entryId: null, tries: null };
  const faultHook = deps.hook;
  // Without a fault hook (production) the points are not even named.
  const hook: Hook | undefined = faultHook
    ? (point) => faultHook(point, { tenantId: own.tenantId, key: own.key, attempt: plan.attempt })
    : undefined;
  const scope: AttemptScope = { deps, plan, lease, hook };
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
      // A function: called only when a tracer records (no object per item otherwise).
      const attributes = () => ({
        "idempo.workflow": plan.def.name,
        "idempo.item": item.name,
        "idempo.attempt": plan.attempt,
      });
      const metered = telemetry.metered;
      const started = metered ? performance.now() : 0;
      const outcome: Outcome = await telemetry.span(
        `${item.kind} ${item.name}`,
        "internal",
        attributes,
        async (span) => {
          try {
            const info = runInfo(plan, s);
            if (item.kind === "step") return await runStep(itemRun(scope, item, info, last, openStep, span));
            if (item.kind === "parallel") return await runParallel(itemRun(scope, item, info, last, openStep, span));
            if (item.kind === "child" || item.kind === "map")
              return await runChildren(itemRun(scope, item, info, last, openStep, span));
            if (item.kind === "sleep") return await runSleep(itemRun(scope, item, info, last, openStep, span));
            if (item.kind === "wait") return await runWait(itemRun(scope, item, info, last, openStep, span));
            if (hook) await hook(`before:phase:${item.name}`);
            return await runPhase(itemRun(scope, item, info, last, openStep, span));
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
    const response = await respondWith(plan.def, runInfo(plan, state), deps.maxPayloadBytes);
    lease.finishing();
    if (!(await completeRun(deps.db, deps.tables, own, response))) throw lease.lost();
    return resultOf(response, false);
  } catch (error) {
    const current = ops.current;
    if (error instanceof CrashSignal) throw error;
    if (error instanceof RejectThrow) {
      try {
        return await reject(scope, error, recoveryPoint, current, openStep);
      } catch (unstored) {
        // A child's rejection is stored: a body that cannot be stored parks the child, as any value does.
        if (unstored instanceof UnstorableValueError || unstored instanceof PayloadTooLargeError)
          return await park(scope, current, openStep, unstored);
        throw unstored;
      }
    }
    if (error instanceof LeaseLostError || error instanceof AttemptTimeoutError) throw lease.lost();
    if (isConnectionLoss(error)) throw unavailable(error, current);
    if (error instanceof UnstorableValueError || error instanceof PayloadTooLargeError) {
      return await park(scope, current, openStep, error);
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
    tries: openStep.tries?.toJson() ?? null,
  }).catch(() => undefined);
}

/**
 * No retry can store this value: park the run instead of letting every
 * retry and resumer repeat the same failure (a poison run). Rethrows `error`.
 */
async function park(
  { deps, plan, lease }: AttemptScope,
  current: Item | undefined,
  openStep: OpenStep,
  error: UnstorableValueError | PayloadTooLargeError,
): Promise<never> {
  const { own } = plan;
  if (current) await recordItemFailure(deps, plan, current, openStep, error);
  lease.finishing();
  if (!(await parkOwnRun(deps.db, deps.tables, own, error.message))) throw lease.lost();
  deps.telemetry.count("parked", { "idempo.workflow": plan.def.name, "idempo.parked.reason": error.code });
  deps.telemetry.log(
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

/**
 * `ctx.reject`: delete the claim, so the client may retry at once. A child
 * run is never deleted (its parent would wait for it for ever, and no
 * client retries it): it ends with the rejection stored as its answer,
 * outcome `failed` as a `ctx.fail` would, and its completion wakes the parent.
 */
async function reject(
  scope: AttemptScope,
  rejection: RejectThrow,
  recoveryPoint: string | null,
  current: Item | undefined,
  openStep: OpenStep,
): Promise<RunResult<unknown>> {
  const { deps, plan, lease } = scope;
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
  const status = checkStatus(rejection.status, `ctx.reject in ${where}`);
  // Answered, never stored: no bound.
  const body = JSON.parse(bodyText(rejection.body, `ctx.reject in ${where}`, Number.POSITIVE_INFINITY)) as JsonValue;
  const deleted = await deleteClaim(deps.db, deps.tables, plan.own);
  if (deleted === "kept") throw new LeaseLostError(plan.own.tenantId, plan.own.key, "ctx.reject");
  if (deleted === "deleted") return { status, body, replayed: false, outcome: "rejected" };
  const response: StoredResponse = {
    outcome: "failed",
    status,
    body: bodyText(rejection.body, `ctx.reject in ${where} of a child run`, deps.maxPayloadBytes),
  };
  if (current) await recordItemFailure(deps, plan, current, openStep, `ctx.reject(${status})`);
  lease.finishing();
  if (!(await completeRun(deps.db, deps.tables, plan.own, response))) throw lease.lost();
  return resultOf(response, false);
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

/** The error for a lost connection at `current`, naming what may have landed (a COMMIT, a call sent alone). */
function unavailable(error: unknown, current: Item | undefined): DatabaseUnavailableError {
  const what = inDoubt(error);
  return new DatabaseUnavailableError(error, what && current ? `${what} of ${current.kind} '${current.name}'` : what);
}
