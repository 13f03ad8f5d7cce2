import { createHash } from "node:crypto";
import type { z } from "zod";
import type { JsonValue } from "../json/json-value.js";
import type { PhaseContext, ReconcileContext, ResponseSpec, RunInfo, StepContext, TimeoutContext } from "./context.js";

/** What a phase or step may return: an object merged into `state`, or nothing. */
export type StateUpdate = object | undefined | void;

/** How a workflow treats an error that is neither `fail` nor `reject`. */
export type UnknownErrorPolicy = "retry" | "store";

/** Per-workflow settings. */
export interface WorkflowOptions {
  /**
   * How long a completed record is kept, in ms (Default: 86 400 000, 24 h):
   * a retry within it gets the stored response. After it the key's
   * tombstone stays for `tombstoneMs`.
   */
  retentionMs?: number;
  /**
   * How long a key is still refused after its record expired, in ms, 0 to
   * 100 years (Default: 604 800 000, 7 days; 0 for none). Meanwhile a
   * compact tombstone (no response, no history) answers a retry with
   * `IdempotencyKeyExpiredError` (410) instead of running the workflow
   * again, and acknowledges a signal for the run. After it the key is
   * forgotten: a reuse runs again as a new run. Copied onto each run at its
   * claim, like `retentionMs`.
   */
  tombstoneMs?: number;
  /** Lease length for this workflow's runs, in ms (Default: the engine's `leaseMs`). */
  leaseMs?: number;
  /**
   * How many attempts a run may start, 1-10 000 (Default: 20). Every claim
   * and takeover is an attempt, counted when it starts (an attempt that
   * crashes its process counts too). The takeover that would start one
   * more parks the run instead: status `parked`, `RunParkedError` to every
   * later call, never taken over by `resumeStale`, until `engine.unpark`
   * gives it a fresh budget. Resuming after a clean suspension is not an
   * attempt. The idea is DBOS's cap on recovery attempts (dead letters).
   */
  maxAttempts?: number;
  /**
   * The longest one attempt may hold the key, in ms, 1-2 147 483 647
   * (Default: the engine's `attemptTimeoutMs`, itself 900 000, 15 min).
   * Past it the attempt stops renewing its lease, gives the key up and its
   * `signal` aborts with `AttemptTimeoutError`; `runOnce` rejects with that
   * error even when workflow code ignores the signal, and the next retry
   * takes over at once. Set it above the longest a healthy attempt takes.
   */
  attemptTimeoutMs?: number;
  /**
   * The longest a phase waits for a row lock, in ms, 1-2 147 483 647
   * (Default: 5 000), set as `lock_timeout` on each phase transaction. A
   * wait past it (a stalled attempt still holding the row, say) rolls the
   * try back and is retried like a serialization failure; when the phase's
   * retry budget runs out, `PhaseConflictError`.
   */
  lockTimeoutMs?: number;
  /**
   * `'retry'` (default): an unknown error leaves the run in flight at its
   * recovery point and is rethrown; a retry after the lease resumes it.
   * `'store'`: the run completes with a stored 500 problem body instead.
   */
  onUnknownError?: UnknownErrorPolicy;
}

/** Retry and recovery settings of one step. */
export interface StepOptions<I, S, O> {
  /** Extra in-process tries for errors `retryable` accepts (Default: 0). */
  retries?: number;
  /**
   * Which errors are worth another try (Default: none): timeouts, 5xx, and a
   * provider's conflict answers such as Stripe's 409 `idempotency_key_in_use`
   * ("a same-key request is still in progress": try later). An error it
   * accepts is transient: when the retries run out, the run stays in flight
   * at its recovery point for the next attempt and is never stored as the
   * run's answer, even under `onUnknownError: 'store'`.
   */
  retryable?: (error: unknown) => boolean;
  /** First backoff delay in ms; doubles per try, full jitter (Default: 100). */
  backoffMs?: number;
  /** Largest backoff delay in ms (Default: 5 000). */
  maxBackoffMs?: number;
  /**
   * Abort `signal` after this many ms per call (Default: no timeout). With
   * `rateLimit`, also the longest the step waits for a token in process: a
   * token due later suspends the run until it is due.
   */
  timeoutMs?: number;
  /**
   * The name of a rate limit of the engine (`createEngine({ rateLimits })`):
   * each call of the step, its retries included, first takes a token of
   * that bucket, shared by every process through the database. The step
   * waits for a token due within its `timeoutMs` (any time without one)
   * without holding a connection; one due later suspends the run until then
   * (status `suspended`, `wakeAt` the token's time; a worker or a retry
   * resumes it), before the step is recorded as started (Default: none).
   * A name the engine does not know raises `WorkflowDefinitionError` when
   * the engine is first given the workflow. See docs/limits.md.
   */
  rateLimit?: string;
  /**
   * Asked on resume when a previous attempt started this step but its result
   * was never recorded (the call may have reached the other system). Return
   * the step's result if the effect happened, or `undefined` to call the
   * step again with the same derived key.
   */
  reconcile?: (ctx: ReconcileContext<I, S>) => Promise<O | undefined> | O | undefined;
}

/** How long a `.sleep` item suspends the run, in ms: a number, or computed from the run. */
export type SleepDuration<I, S> = number | ((info: RunInfo<I, S>) => number | Promise<number>);

/** Settings of a `.waitFor` item. `P` is the payload's type, `T` what `onTimeout` returns. */
export interface WaitForOptions<I, S, P, T> {
  /**
   * How long to wait for the signal, in ms, from the moment the run first
   * reaches the item, on the database clock (Default: no timeout). The
   * deadline is committed with the suspension, so it holds across restarts.
   */
  timeoutMs?: number;
  /**
   * Called when the timeout passes without the signal: may call `ctx.fail`
   * (the run completes with that response), or return a value that is
   * merged into state under the item's name as if it were the payload.
   * Without it, a timed-out wait completes the run with a stored 408 whose
   * problem code is `wait_timeout`.
   */
  onTimeout?: (ctx: TimeoutContext<I, S>) => T | Promise<T>;
  /**
   * A zod schema the payload must pass. `engine.signal` checks it when its
   * engine knows the workflow (see `EngineOptions.workflows`), raising
   * `InputValidationError`; the run always parses the payload with it before
   * merging, so state holds the schema's output.
   */
  schema?: z.ZodType<P>;
}

/** Settings of a `.parallel` item. */
export interface ParallelOptions {
  /**
   * How many branches may be called at once, 1-1 000 (Default: all of
   * them). The others start, in the order they were declared, as running
   * ones finish. Per attempt: a takeover counts again from zero.
   */
  concurrency?: number;
}

/** Settings of a `.child` item. */
export interface ChildOptions {
  /**
   * The longest the parent waits for its children, in ms from the moment it
   * first reaches the item, on the database clock, 1 to 100 years (Default:
   * no timeout). Past it the item fails for good: the parent completes with
   * a stored 408 whose problem code is `children_timeout`, and its children
   * that have not completed are canceled.
   */
  timeoutMs?: number;
}

/** Settings of a `.map` item: a `.child`'s, and how many children run at once. */
export interface MapOptions extends ChildOptions {
  /**
   * How many children may be runnable at once, 1-10 000 (Default: all of
   * them). The others are created with them but wait, not due, in input
   * order; each child that completes makes the next one due, in its own
   * completing transaction.
   */
  concurrency?: number;
}

/**
 * What a `.child` item (each element of a `.map` item's array) puts in
 * state: the child run's stored response. `B` is the child workflow's body
 * when it succeeded; a failed, errored or canceled child's body is its
 * stored problem or `ctx.fail` body (or `ctx.reject` body: a child's
 * reject ends it, outcome `failed`).
 */
export type ChildResult<B> =
  | { readonly status: number; readonly body: B; readonly outcome: "succeeded" }
  | { readonly status: number; readonly body: JsonValue; readonly outcome: "failed" | "errored" | "canceled" };

/** @internal One branch of a `.parallel` item: a step run beside the item's other branches. */
export interface Branch {
  readonly name: string;
  readonly run: (ctx: StepContext<unknown, unknown>) => unknown;
  readonly options: StepOptions<unknown, unknown, unknown>;
}

/** What a `.concurrency` key is computed from: the run's input, tenant and key, the same on every attempt. */
export interface ConcurrencyInfo<I> {
  readonly input: I;
  readonly tenantId: string;
  readonly key: string;
}

/** A workflow's limit on attempts executing at once (`.concurrency`). */
export interface ConcurrencyOptions<I> {
  /**
   * The limit's key: attempts of this workflow with the same key share
   * `max` slots (keys of different workflows never meet). A string of 1 to
   * 255 UTF-8 bytes; another answer, or an error it throws, fails the call
   * before anything is claimed (`runOnce`, `enqueue`) or the attempt.
   */
  key: (info: ConcurrencyInfo<I>) => string;
  /** At most this many attempts with one key execute at once, 1-10 000. */
  max: number;
}

/** @internal The settings of a definition: the workflow's options and what `.concurrency` and `.priority` set. */
export interface DefinitionOptions extends WorkflowOptions {
  readonly concurrency?: ConcurrencyOptions<unknown>;
  /** Workers take a tenant's due runs by priority, higher first (Default: 0). */
  readonly priority?: number;
}

/** @internal A `.child` or `.map` item. */
export interface ChildrenItem<K extends "child" | "map"> {
  readonly kind: K;
  readonly name: string;
  /** The child workflow's definition (its newest version: what new children start under). */
  readonly child: Definition;
  /** The child's input (`child`), or the children's inputs in order (`map`). */
  readonly inputs: (info: RunInfo<unknown, unknown>) => unknown;
  readonly options: MapOptions;
}

/** @internal One item of a definition: a phase, a step, a parallel item, a child or map item, a sleep or a wait for a signal. */
export type Item =
  | {
      readonly kind: "phase";
      readonly name: string;
      readonly run: (ctx: PhaseContext<unknown, unknown, unknown>) => unknown;
    }
  | {
      readonly kind: "step";
      readonly name: string;
      readonly run: (ctx: StepContext<unknown, unknown>) => unknown;
      readonly options: StepOptions<unknown, unknown, unknown>;
    }
  | {
      readonly kind: "parallel";
      readonly name: string;
      readonly branches: readonly Branch[];
      readonly options: ParallelOptions;
    }
  | ChildrenItem<"child">
  | ChildrenItem<"map">
  | {
      readonly kind: "sleep";
      readonly name: string;
      readonly duration: SleepDuration<unknown, unknown>;
    }
  | {
      readonly kind: "wait";
      readonly name: string;
      readonly options: WaitForOptions<unknown, unknown, unknown, unknown>;
    };

/** @internal The data behind a finished workflow definition. */
export interface Definition {
  readonly name: string;
  readonly schema: z.ZodType | undefined;
  readonly items: readonly Item[];
  readonly respond: (ctx: RunInfo<unknown, unknown>) => ResponseSpec<unknown> | Promise<ResponseSpec<unknown>>;
  readonly options: Readonly<DefinitionOptions>;
  /** The body `runOnce` answers with (status 202) when a run suspends; absent = `null`. */
  readonly accepted: ((info: RunInfo<unknown, unknown>) => unknown) | undefined;
  /**
   * `kind:name` of each item, in order: what a run records to detect changed
   * code. A parallel item's kind carries its branches (see {@link outlineEntry}).
   */
  readonly outline: readonly string[];
  /** SHA-256 (hex) of the outline. */
  readonly hash: string;
  /** The version stored with every run this definition starts (1 unless `.version(n)` set it). */
  readonly version: number;
  /** Older versions of the same workflow kept deployed with it (`.replaces`), newest first, never this one. */
  readonly replaces: readonly Definition[];
}

declare const inputType: unique symbol;
declare const bodyType: unique symbol;

/**
 * A finished workflow: pass it to `engine.runOnce`. Immutable and safe to
 * share between engines and modules. `In` is the input the caller passes
 * (before zod parsing), `B` the body `respond` returns.
 */
export interface Workflow<In, B> {
  /** The workflow's name, stored with every run and part of the request fingerprint. */
  readonly name: string;
  /**
   * The version new runs are stored under: 1 unless the builder's
   * `.version(n)` set another. Not part of the fingerprint, so a retry
   * after a deploy still matches the run it started.
   */
  readonly version: number;
  /** @internal */
  readonly definition: Definition;
  /** @internal type-only marker */
  readonly [inputType]?: In;
  /** @internal type-only marker */
  readonly [bodyType]?: B;
}

/** @internal */
export function outlineHash(outline: readonly string[]): string {
  return createHash("sha256").update(JSON.stringify(outline)).digest("hex");
}

/**
 * @internal An item's entry in the outline, `kind:name`. A parallel item's
 * kind carries its branch names as a JSON array, its colons written
 * `\u003a` so that the name is still everything after the first colon
 * (what every reader of a stored outline takes it to be):
 * `parallel["email","sms"]:notify`. A branch renamed, added or removed
 * therefore changes the outline, and a run that started under the old
 * branches is not resumed under the new ones without a new version.
 */
export function outlineEntry(item: Item): string {
  if (item.kind !== "parallel") return `${item.kind}:${item.name}`;
  const branches = JSON.stringify(item.branches.map((b) => b.name)).replaceAll(":", "\\u003a");
  return `parallel${branches}:${item.name}`;
}

/** One entry of a stored outline, read back: its kind, name and, for a parallel item, its branch names. */
export interface OutlineItem {
  readonly kind: string;
  readonly name: string;
  /** The branch names of a parallel item, in declaration order; absent for other kinds. */
  readonly branches?: readonly string[];
}

/**
 * @internal Read an outline entry (see {@link outlineEntry}); an entry this
 * release does not know reads as its kind and name.
 */
export function outlineItem(entry: string): OutlineItem {
  const colon = entry.indexOf(":");
  const kind = entry.slice(0, colon);
  const name = entry.slice(colon + 1);
  if (!kind.startsWith("parallel[")) return { kind, name };
  try {
    const branches = JSON.parse(kind.slice("parallel".length)) as unknown;
    if (Array.isArray(branches) && branches.every((b) => typeof b === "string")) {
      return { kind: "parallel", name, branches };
    }
  } catch {
    // Not an outline this release wrote: kept as it reads.
  }
  return { kind, name };
}
