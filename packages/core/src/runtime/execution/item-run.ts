/**
 * What the item runners of one attempt share: the named argument each runner
 * takes (`ItemRun`), what a runner returns (`Outcome`), and the steps every
 * kind of item ends with (the progress it commits, the response, `ctx.fail`,
 * `fail`/`reject` control).
 */
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import type { Advance } from "../../store/progress.js";
import { completeRun, recordFailure } from "../../store/progress.js";
import type { Executor, StoredResponse } from "../../store/run-store.js";
import type { SpanScope } from "../../telemetry/telemetry.js";
import type { RunInfo } from "../../workflow/context.js";
import type { Definition, Item } from "../../workflow/definition.js";
import { FailThrow, RejectThrow } from "./control-flow.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { ExecutorDeps, Plan } from "./plan.js";
import type { RunResult } from "./run-result.js";
import type { StepTries } from "./step-tries.js";
import { bodyText, checkStatus, mergeState, stateText } from "./values.js";

/** What an item left: the run goes on with `state`, or it is done with `result`. */
export type Outcome = { kind: "continue"; state: JsonObject } | { kind: "done"; result: RunResult<unknown> };

/** The fault hook bound to this attempt. */
export type Hook = (point: string) => void | Promise<void>;

/** The history entry of a step that started but has not recorded its result, and its calls so far. */
export interface OpenStep {
  entryId: string | null;
  tries: StepTries | null;
}

/** What every item runner of one attempt shares. */
export interface AttemptScope {
  readonly deps: ExecutorDeps;
  readonly plan: Plan;
  readonly lease: LeaseKeeper;
  /** Absent when no fault hook is attached (production): the points are not even named. */
  readonly hook: Hook | undefined;
}

/** One item to run, the argument of each item runner. */
export interface ItemRun<K extends Item["kind"]> extends AttemptScope {
  readonly item: Extract<Item, { kind: K }>;
  /** The run as workflow code sees it before this item. */
  readonly info: RunInfo<unknown, unknown>;
  /** The workflow's last item: its commit also stores the response. */
  readonly last: boolean;
  readonly openStep: OpenStep;
  /** The item's span. */
  readonly span: SpanScope;
}

/** The run as workflow code sees it, at `state`. */
export function runInfo(plan: Plan, state: JsonObject): RunInfo<unknown, unknown> {
  return { input: plan.input, state, key: plan.own.key, tenantId: plan.own.tenantId, attempt: plan.attempt };
}

/** The response a run stores: `respond`'s, checked and turned into its stored JSON text. */
export async function respondWith(
  def: Definition,
  info: RunInfo<unknown, unknown>,
  maxBytes: number,
): Promise<StoredResponse> {
  const spec = await def.respond(info);
  const status = checkStatus(spec?.status, `respond of workflow '${def.name}'`);
  return { outcome: "succeeded", status, body: bodyText(spec.body, `respond of workflow '${def.name}'`, maxBytes) };
}

/** What the caller gets: the body through the same JSON round trip a replay uses. */
export function resultOf(response: StoredResponse, replayed: boolean): RunResult<unknown> {
  const body = JSON.parse(response.body) as JsonValue;
  return { status: response.status, body, replayed, outcome: response.outcome } as RunResult<unknown>;
}

/**
 * The answer an item stores when what it waited for did not come in time:
 * a failed 408 whose body is an RFC 9457 problem with the item's `code`
 * (`wait_timeout`, `children_timeout`) and `detail`.
 */
export function timedOutResponse(code: string, detail: string): StoredResponse {
  return {
    outcome: "failed",
    status: 408,
    body: JSON.stringify({ type: "about:blank", title: "Request Timeout", status: 408, code, detail }),
  };
}

/** What an item commits: the run's state with the item's value merged in, and the progress that stores it. */
export interface ItemProgress {
  readonly state: JsonObject;
  /** The item as the recovery point, without the response (see {@link withResponse}). */
  readonly progress: Advance;
}

/**
 * `merged` merged into the run's state as the item's progress; `value` is
 * what the payload bound measures when the whole state is over it (the
 * item's own result, which `merged` may wrap). `where` names the item in errors.
 *
 * @throws UnstorableValueError when `merged` is not a JSON object; PayloadTooLargeError when `value` is over the bound.
 */
export function itemProgress<K extends Item["kind"]>(
  { deps, plan, item, info }: ItemRun<K>,
  where: string,
  merged: unknown,
  value: unknown = merged,
): ItemProgress {
  const state = mergeState(info.state as JsonObject, merged, where);
  return {
    state,
    progress: {
      name: item.name,
      attempt: plan.attempt,
      state: stateText(state, value, where, deps.maxPayloadBytes),
      leaseMs: plan.leaseMs,
    },
  };
}

/**
 * `progress`, with the run's response (`respond` at `state`) when the item
 * is the workflow's last: its commit completes the run.
 */
export async function withResponse<K extends Item["kind"]>(
  { deps, plan, last }: ItemRun<K>,
  progress: Advance,
  state: JsonObject,
): Promise<Advance> {
  if (!last) return progress;
  return { ...progress, response: await respondWith(plan.def, runInfo(plan, state), deps.maxPayloadBytes) };
}

/** Where the run stands once `advance` is committed: done with its response, or going on with `state`. */
export function advanced(advance: Advance, state: JsonObject): Outcome {
  return advance.response ? { kind: "done", result: resultOf(advance.response, false) } : { kind: "continue", state };
}

/** A `ctx.fail` to store: the throw, the item's history entry, and the handle to write through. */
export interface FailureToStore {
  /** The phase's transaction (its writes commit with the stored response), or the engine's handle. */
  readonly db: Executor;
  readonly failure: FailThrow;
  /** `tries`: a step's calls as JSON text (null for a single call). */
  readonly item: { kind: Item["kind"]; name: string; entryId: string | null; tries?: string | null };
}

/**
 * `ctx.fail`: close the phase's or step's history entry as failed and
 * complete the run with the stored response, fenced like every write.
 */
export async function completeWithFailure(
  { deps, plan, lease }: AttemptScope,
  { db, failure, item }: FailureToStore,
): Promise<Outcome> {
  const where = `ctx.fail in ${item.kind} '${item.name}'`;
  const response: StoredResponse = {
    outcome: "failed",
    status: checkStatus(failure.status, where),
    body: bodyText(failure.body, where, deps.maxPayloadBytes),
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

/**
 * `fail` and `reject` throw; they also remember the first call, so workflow
 * code that catches the throw cannot turn a declined card into a success.
 */
export function control() {
  let thrown: FailThrow | RejectThrow | undefined;
  return {
    fail(status: number, body: unknown): never {
      thrown ??= new FailThrow(status, body);
      throw thrown;
    },
    reject(status: number, body: unknown): never {
      thrown ??= new RejectThrow(status, body);
      throw thrown;
    },
    /** Rethrow a fail/reject that user code caught and swallowed. */
    rethrowCaught(): void {
      if (thrown) throw thrown;
    },
  };
}
