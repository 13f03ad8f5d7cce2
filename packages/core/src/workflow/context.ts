import type { PhaseTx } from "../database/data-layer.js";

/** What `respond` returns and what a run's caller receives: an HTTP-like status and a JSON body. */
export interface ResponseSpec<B> {
  /** HTTP-like status code, 100-599. */
  status: number;
  /** JSON-serialisable body, stored verbatim and replayed to every retry. */
  body: B;
}

/** What every phase, step and `respond` can read about the run it belongs to. */
export interface RunInfo<I, S> {
  /** The validated input, frozen: the copy fixed at the claim, identical on every attempt. */
  readonly input: I;
  /** The state accumulated by the phases and steps before this one, frozen. */
  readonly state: S;
  /** The client's idempotency key. */
  readonly key: string;
  /** The tenant the key belongs to. */
  readonly tenantId: string;
  /** Which attempt of the run this is: 1 for the first, +1 for each takeover. */
  readonly attempt: number;
}

/** Control methods available inside phases and steps. */
export interface RunControl {
  /**
   * Finish the run now with this response (a declined card is an answer, not
   * a crash). The response is stored and replayed to every retry. In a
   * phase, writes the phase already made commit together with the response.
   */
  fail(status: number, body: unknown): never;
  /**
   * Refuse the request before anything is committed: the claim is deleted,
   * nothing is stored, and the client may retry the key at once with
   * corrected input. Only allowed before the first phase or step has
   * committed; later it raises `WorkflowUsageError` and the run stays at its
   * recovery point. In a child run (of a `.child` or `.map` item), which no
   * client retries, it ends the child instead: the rejection is stored as
   * its answer (outcome `failed`) and its parent reads it.
   */
  reject(status: number, body: unknown): never;
}

/** Options of one outbox message. */
export interface EnqueueOptions {
  /**
   * The key the relay passes to the handler so the receiver can deduplicate
   * (Default: derived from tenant, key, run, phase and position). Same rules as an idempotency key.
   */
  deliveryKey?: string;
}

/** The phase's handle on the outbox: messages commit or vanish with the phase. */
export interface Outbox {
  /**
   * Queue a message for at-least-once delivery by a relay, in the phase's
   * transaction. `payload` must be a JSON value.
   * @returns the message's delivery key.
   * @throws UnstorableValueError when the payload is not JSON.
   * @throws InvalidIdempotencyKeyError when the topic or a given delivery key is malformed.
   * @throws PayloadTooLargeError when the payload is over the engine's `maxPayloadBytes` (the run is parked).
   * @throws InvalidOptionError when `options` holds an unknown key (a misspelt `deliveryKey`).
   */
  enqueue(topic: string, payload: unknown, options?: EnqueueOptions): Promise<string>;
}

/** The argument of a phase function. */
export interface PhaseContext<DB, I, S> extends RunInfo<I, S>, RunControl {
  /** Side effects that cannot take an idempotency key (email, SMS); see {@link Outbox}. */
  readonly outbox: Outbox;
  /**
   * The phase's transaction, as the engine's data layer makes it: a Kysely
   * `Transaction<DB>` for a `workflow<DB>`, a Drizzle transaction or a
   * node-postgres `PoolClient` for a `workflow<WithTx<...>>` (see
   * `fromDrizzle`, `fromNodePostgres`). The phase's writes, the advance of
   * the recovery point and the owner-token check commit in it together.
   * Never use the engine's database directly inside a phase: on a
   * single-connection database (PGlite) that waits forever.
   */
  readonly tx: PhaseTx<DB>;
}

/** The argument of a step function. Steps run outside any transaction. */
export interface StepContext<I, S> extends RunInfo<I, S>, RunControl {
  /** The derived key to pass to the downstream system; identical on every attempt. */
  readonly idempotencyKey: string;
  /** Aborted when the lease is lost or the step's `timeoutMs` elapses. */
  readonly signal: AbortSignal;
}

/** The argument of a step's `reconcile` function. */
export interface ReconcileContext<I, S> extends RunInfo<I, S> {
  /** The derived key the in-doubt call used. */
  readonly idempotencyKey: string;
  /** Aborted when the lease is lost. */
  readonly signal: AbortSignal;
}

/**
 * The argument of a `.waitFor` item's `onTimeout`: what a phase sees,
 * without `tx` and `outbox` (no transaction is open), and with `fail` but
 * not `reject`: the run was already answered (202) or enqueued when it
 * suspended, so there is no claim left to refuse.
 */
export interface TimeoutContext<I, S> extends RunInfo<I, S>, Pick<RunControl, "fail"> {}
