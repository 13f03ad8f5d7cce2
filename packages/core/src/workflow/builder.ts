import type { z } from "zod";
import { WorkflowDefinitionError } from "../errors.js";
import type { JsonValue } from "../json/json-value.js";
import { MAX_PRIORITY, MAX_STORED_MS } from "../options/limits.js";
import { intOption } from "../options/option-checks.js";
import { childItem } from "./child-builder.js";
import type { PhaseContext, ResponseSpec, RunInfo, StepContext } from "./context.js";
import type {
  ChildOptions,
  ChildResult,
  ConcurrencyOptions,
  Definition,
  DefinitionOptions,
  Item,
  MapOptions,
  ParallelOptions,
  SleepDuration,
  StateUpdate,
  StepOptions,
  WaitForOptions,
  Workflow,
} from "./definition.js";
import {
  checkConcurrency,
  checkInputSchema,
  checkName,
  checkNewItem,
  checkStepOptions,
  checkWaitForOptions,
} from "./item-checks.js";
import type { Merge, ParallelBuilder } from "./parallel-builder.js";
import { parallelItem } from "./parallel-builder.js";
import type { Versioning } from "./versions.js";
import { checkVersion, finishedWorkflow, UNVERSIONED } from "./versions.js";

/**
 * Immutable fluent builder of a workflow; every method returns a new
 * builder, so a partial chain can be shared. The type of `state` grows along
 * the chain: each phase or step sees what the ones before it returned.
 *
 * `DB` is the Kysely database type phases see through `tx`; `In` the input
 * callers pass; `I` the parsed input; `S` the accumulated state.
 */
export class WorkflowBuilder<DB, In, I, S> {
  readonly #name: string;
  readonly #schema: z.ZodType | undefined;
  readonly #items: readonly Item[];
  readonly #options: Readonly<DefinitionOptions>;
  readonly #versioning: Versioning;
  readonly #accepted: Definition["accepted"];

  /** @internal use {@link workflow} */
  constructor(
    name: string,
    schema: z.ZodType | undefined,
    items: readonly Item[],
    options: Readonly<DefinitionOptions>,
    versioning: Versioning = UNVERSIONED,
    accepted: Definition["accepted"] = undefined,
  ) {
    this.#name = name;
    this.#schema = schema;
    this.#items = items;
    this.#options = options;
    this.#versioning = versioning;
    this.#accepted = accepted;
    Object.freeze(this);
  }

  /**
   * Number this definition (Default: 1). Every run it starts stores the
   * number; a run later resumed (a retry, `resumeStale`, a worker) goes on
   * under the deployed definition with its own number when there is one,
   * so a run started under version 1 finishes on version 1's phases and
   * steps while new runs take version 2. Bump it whenever a change must not
   * reach runs already in flight or suspended, and keep the old definition
   * deployed with {@link replaces}. The version is not part of the request
   * fingerprint. The idea is Restate's and Temporal's worker versioning: a
   * run stays pinned to the code it started on. See docs/versioning.md.
   *
   * @example
   * ```ts
   * // Runs started on `checkout` (version 1) finish there; new runs take version 2.
   * const checkoutV2 = workflow('checkout').version(2).replaces(checkout)
   *   .phase('create_order', () => ({ orderId: 'o-1' })).respond(({ state }) => ({ status: 201, body: state }))
   * ```
   * @param version an integer from 1 to 2 147 483 647; higher is newer.
   * @throws WorkflowDefinitionError on any other value, or when the version was already set.
   */
  version(version: number): WorkflowBuilder<DB, In, I, S> {
    checkVersion(this.#name, version);
    if (this.#versioning.version !== undefined) {
      throw new WorkflowDefinitionError(
        `workflow '${this.#name}': version is already ${this.#versioning.version}; call .version() once`,
      );
    }
    return this.#copy({ versioning: Object.freeze({ ...this.#versioning, version }) });
  }

  /**
   * Keep older versions of this workflow deployed with this one: wherever
   * this workflow is given (`runOnce`, `resumeStale`, `startWorker`), runs
   * stored under one of `older`'s versions resume under that definition.
   * New runs always take this (the newest) version. What an older version
   * replaces is kept too, so `v3.replaces(v2)` also keeps what `v2`
   * replaces. May be called more than once; checked by `respond`.
   *
   * @example
   * ```ts
   * const v1 = workflow('signup').phase('create', () => ({})).respond(() => ({ status: 201, body: null }))
   * const v2 = workflow('signup').version(2).replaces(v1).phase('create', () => ({})).respond(() => ({ status: 201, body: null }))
   * ```
   * @param older finished workflows with the same name and lower versions.
   * @throws WorkflowDefinitionError from `respond` when one is not a
   * finished workflow, has another name or a version not below this one,
   * or when two different definitions carry the same version.
   */
  replaces(...older: readonly Workflow<unknown, unknown>[]): WorkflowBuilder<DB, In, I, S> {
    const replaces = Object.freeze([...this.#versioning.replaces, ...older]);
    return this.#copy({ versioning: Object.freeze({ ...this.#versioning, replaces }) });
  }

  /** A new builder with some of this one's parts replaced (the type parameters are the caller's to say). */
  #copy<S2 = S>(parts: {
    items?: readonly Item[];
    options?: Readonly<DefinitionOptions>;
    versioning?: Versioning;
    accepted?: Definition["accepted"];
  }): WorkflowBuilder<DB, In, I, S2> {
    const { items = this.#items, options = this.#options, versioning = this.#versioning } = parts;
    const accepted = "accepted" in parts ? parts.accepted : this.#accepted;
    return new WorkflowBuilder(this.#name, this.#schema, items, options, versioning, accepted);
  }

  /**
   * At most `max` attempts of this workflow with the same `key` execute at
   * once, across every process that shares the database. An attempt holds
   * a slot of its key as long as its lease (a killed process's slot frees
   * when its lease runs out) and until the run completes or suspends. A run
   * over the limit waits, suspended and due, holding nothing: `runOnce`
   * raises `IdempotencyKeyInProgressError` with a `retryAfterMs` (or waits,
   * within `waitInFlightMs`); workers skip it until a slot frees. The last
   * call counts. Idea: Inngest's and Trigger.dev's concurrency keys; see docs/limits.md.
   * @example
   * ```ts
   * workflow('sync_account')
   *   .input(z.object({ accountId: z.string() }))
   *   .concurrency({ key: ({ tenantId, input }) => `${tenantId}:${input.accountId}`, max: 1 }) // one sync per account
   *   .phase('sync', ({ input }) => ({ synced: input.accountId }))
   * ```
   * @param limit `key`: a function of `{ input, tenantId, key }` naming the limit; `max`: 1-10 000.
   * @throws InvalidOptionError when `limit` is not an object, holds an unknown option, lacks `key` or `max`, or `max` is out of range.
   */
  concurrency(limit: ConcurrencyOptions<I>): WorkflowBuilder<DB, In, I, S> {
    checkConcurrency(`workflow '${this.#name}', concurrency`, limit);
    return this.#set({ concurrency: Object.freeze({ ...limit }) as ConcurrencyOptions<unknown> });
  }

  /**
   * Workers take this workflow's due runs before a tenant's runs of lower
   * priority (higher first; Default: 0), within each tenant's fair share;
   * `enqueue(..., { priority })` sets one run's. The last call counts.
   * @example
   * ```ts
   * const refundNow = workflow('refund_now').priority(10).phase('refund', () => ({ refunded: true }))
   * ```
   * @throws InvalidOptionError unless an integer from -2 147 483 647 to 2 147 483 647.
   */
  priority(priority: number): WorkflowBuilder<DB, In, I, S> {
    intOption(`workflow '${this.#name}'`, "priority", priority, -MAX_PRIORITY, MAX_PRIORITY);
    return this.#set({ priority });
  }

  #set(options: Partial<DefinitionOptions>): WorkflowBuilder<DB, In, I, S> {
    return this.#copy({ options: Object.freeze({ ...this.#options, ...options }) });
  }

  /**
   * Validate input with a zod schema before anything is claimed. Invalid
   * input raises `InputValidationError` (400) and leaves no row. The
   * fingerprint is taken from the raw input, before zod defaults or stripping.
   * @example
   * ```ts
   * const refund = workflow('refund').input(z.object({ orderId: z.string(), amountCents: z.number().int().positive() }))
   *   .phase('record', ({ input }) => ({ refundedCents: input.amountCents })).respond(({ state }) => ({ status: 200, body: state }))
   * ```
   */
  input<Z extends z.ZodType>(schema: Z): WorkflowBuilder<DB, z.input<Z>, z.output<Z>, S> {
    checkInputSchema(this.#name, this.#items, schema);
    return new WorkflowBuilder(this.#name, schema, this.#items, this.#options, this.#versioning, this.#accepted);
  }

  /**
   * An atomic phase: `fn` runs inside a transaction on the engine's
   * database; its writes, the returned state and the advance of the recovery
   * point to `name` commit together, fenced on the owner token.
   *
   * @example
   * ```ts
   * workflow<Database>('place_order').input(z.object({ cartId: z.string(), amountCents: z.number().int() }))
   *   .phase('create_order', async ({ tx, input }) => {
   *     const id = `order-${input.cartId}`
   *     await tx.insertInto('orders').values({ id, cart_id: input.cartId, amount_cents: input.amountCents }).execute()
   *     return { orderId: id } // merged into state; the next item sees state.orderId
   *   })
   * ```
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   */
  phase<O extends StateUpdate>(
    name: string,
    fn: (ctx: PhaseContext<DB, I, S>) => Promise<O> | O,
  ): WorkflowBuilder<DB, In, I, Merge<S, O>> {
    return this.#add(
      Object.freeze({ kind: "phase", name, run: fn as Extract<Item, { kind: "phase" }>["run"] }) as Item,
    );
  }

  /**
   * A step: a call to another system, run outside any transaction with a
   * derived `idempotencyKey`. Its result is recorded (and merged into
   * `state`) before the run moves on; a recorded step is never called again.
   *
   * @example
   * ```ts
   * workflow('pay').input(z.object({ amountCents: z.number().int() }))
   *   .step('charge', async ({ input, idempotencyKey, signal }) => {
   *     const charge = await payments.charge(input.amountCents, { idempotencyKey, signal })
   *     return { chargeId: charge.id }
   *   }, { retries: 3, backoffMs: 500, timeoutMs: 10_000 })
   * ```
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   * @throws InvalidOptionError when `options` is not an object, holds an unknown option (naming the known ones), or one is of the wrong type or out of range.
   */
  step<O extends StateUpdate>(
    name: string,
    fn: (ctx: StepContext<I, S>) => Promise<O> | O,
    options: StepOptions<I, S, O> = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, O>> {
    checkStepOptions(`workflow '${this.#name}', step '${name}'`, options);
    return this.#add(Object.freeze({ kind: "step", name, run: fn, options: Object.freeze({ ...options }) }) as Item);
  }

  /**
   * Steps run at the same time: one item whose branches (declared on `p`
   * with `.step`, see {@link ParallelBuilder}) are called at once, each
   * with its own derived key (of tenant, key, workflow, this item's and the
   * branch's name), started and recorded markers, retries and `reconcile`.
   * A branch is recorded the moment it returns; after a crash only the
   * branches not yet recorded are called again, with the same keys. Once
   * every branch is recorded, `{ [name]: { [branch]: result } }` is merged
   * into state and `name` becomes the recovery point. When a branch fails
   * for good (its error after its retries), no further branch starts, the
   * running ones settle and stay recorded, and the item fails with that
   * error (`ctx.fail` in a branch stores its response once they settled).
   * See docs/fan-out.md.
   *
   * @example
   * ```ts
   * workflow('order_placed').parallel('notify', (p) => p
   *   .step('email', async ({ idempotencyKey, signal }) => ({ id: await mailer.send({ idempotencyKey, signal }) }))
   *   .step('sms', async ({ idempotencyKey }) => ({ id: await sms.send({ idempotencyKey }) }), { retries: 3 }),
   *   { concurrency: 2 })
   * ```
   * @param build declares the branches: `(p) => p.step(a, fn, options?).step(b, fn, options?)`; at least one.
   * @param options `concurrency`: how many branches run at once (Default: all); see {@link ParallelOptions}.
   * @throws WorkflowDefinitionError when `name` is already used in this workflow, or `build` declares no branch or two with one name.
   * @throws InvalidOptionError when `options` or a branch's options hold an unknown option, or one is of the wrong type or out of range.
   */
  parallel<N extends string, R>(
    name: N,
    build: (p: ParallelBuilder<I, S, Record<never, never>>) => ParallelBuilder<I, S, R>,
    options: ParallelOptions = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, { [K in N]: R }>> {
    checkName("parallel", name);
    return this.#add(parallelItem(`workflow '${this.#name}', parallel '${name}'`, name, build, options));
  }

  /**
   * One child run of `wf` (input from `input`), created with the item's start and keyed from this run; the run waits,
   * holding nothing, for it (at most `timeoutMs`, {@link ChildOptions}) and puts its `{ status, body, outcome }` in state.
   * @throws WorkflowDefinitionError when `name` is taken, `wf` is not a finished workflow or `input` not a function.
   */
  child<N extends string, CIn, CB>(
    name: N,
    wf: Workflow<CIn, CB>,
    input: (info: RunInfo<I, S>) => CIn | Promise<CIn>,
    options: ChildOptions = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, { [K in N]: ChildResult<CB> }>> {
    return this.#add(childItem(this.#name, "child", name, wf as Workflow<unknown, unknown>, input, options ?? {}));
  }

  /**
   * Fan out and in: as `.child`, one child per element of `inputs`' array
   * (all created in one transaction), their results merged in input order;
   * `options`: `concurrency` (children runnable at once), `timeoutMs` ({@link MapOptions}).
   * @example `.map('transfers', transfer, ({ input }) => input.sellers.map((sellerId) => ({ sellerId })), { concurrency: 5 })`
   * @throws WorkflowDefinitionError as `.child`; InvalidOptionError on an unknown option or one out of range.
   */
  map<N extends string, CIn, CB>(
    name: N,
    wf: Workflow<CIn, CB>,
    inputs: (info: RunInfo<I, S>) => readonly CIn[] | Promise<readonly CIn[]>,
    options: MapOptions = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, { [K in N]: ChildResult<CB>[] }>> {
    return this.#add(childItem(this.#name, "map", name, wf as Workflow<unknown, unknown>, inputs, options ?? {}));
  }

  /**
   * A durable sleep: commits the wake-up time (database clock, `ms` from
   * now) with the item as the recovery point and suspends the run. No
   * process, connection or timer holds it meanwhile; once the time has
   * passed, a worker (`engine.startWorker`) or a `runOnce` with the same
   * key resumes it after this item, also after every process restarted.
   * A sleep of seven days costs one row. Resuming is not a new attempt.
   *
   * @example
   * ```ts
   * workflow('trial').phase('start', () => ({ plan: 'pro' }))
   *   .sleep('trial_period', 14 * 24 * 60 * 60 * 1000) // fourteen days, one row meanwhile
   *   .phase('convert', ({ state }) => ({ converted: state.plan }))
   * ```
   * @param ms 0 to 3 153 600 000 000 (100 years), or a function of `{ input, state, key, tenantId, attempt }` returning it.
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   * @throws InvalidOptionError when a fixed `ms` is out of range (a computed one that is out of range parks the run).
   */
  sleep(name: string, ms: SleepDuration<I, S>): WorkflowBuilder<DB, In, I, S> {
    if (typeof ms !== "function") intOption(`workflow '${this.#name}', sleep '${name}'`, "ms", ms, 0, MAX_STORED_MS);
    return this.#add(Object.freeze({ kind: "sleep", name, duration: ms }) as Item);
  }

  /**
   * Wait for a signal: the run suspends until `engine.signal(tenantId, key,
   * name, payload)` delivers a JSON payload, which is merged into state as
   * `{ [name]: payload }`. A signal sent before the run reaches the item is
   * kept and consumed on arrival; the same signal delivered twice counts
   * once. On timeout, `onTimeout` decides (see {@link WaitForOptions}).
   * Resuming is not a new attempt.
   *
   * @example
   * ```ts
   * const payWith3ds = workflow('pay_3ds').waitFor('challenge', { schema: z.object({ approved: z.boolean() }), timeoutMs: 15 * 60_000 })
   *   .respond(({ state }) => ({ status: state.challenge.approved ? 200 : 402, body: state.challenge }))
   * // Elsewhere, in the provider's webhook handler:
   * await engine.signal('acme', 'order-7f3a', 'challenge', { approved: true })
   * ```
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   * @throws InvalidOptionError when `options` is not an object, holds an unknown option (`timeOutMs` for `timeoutMs`: named with the known ones), `timeoutMs` is out of range or `onTimeout` is not a function.
   */
  waitFor<N extends string, P = JsonValue, T = never>(
    name: N,
    options: WaitForOptions<I, S, P, T> = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, { [K in N]: P | T }>> {
    checkWaitForOptions(`workflow '${this.#name}', waitFor '${name}'`, options);
    return this.#add(Object.freeze({ kind: "wait", name, options: Object.freeze({ ...options }) }) as Item);
  }

  /**
   * The body `runOnce` answers with when the run suspends (status 202,
   * `outcome: 'suspended'`); without it the body is `null`. `fn` gets
   * `{ input, state, key, tenantId, attempt }` with the state committed at
   * the suspension; its result must be a JSON value.
   * @example
   * ```ts
   * workflow('export').phase('queue', () => ({ exportId: 'e-1' })).accepted(({ state }) => ({ exportId: state.exportId ?? null }))
   * ```
   */
  accepted(fn: (info: RunInfo<I, Partial<S>>) => unknown): WorkflowBuilder<DB, In, I, S> {
    if (typeof fn !== "function") {
      throw new WorkflowDefinitionError(`workflow '${this.#name}': .accepted() needs a function`);
    }
    return this.#copy({ accepted: fn as Definition["accepted"] });
  }

  /**
   * Finish the definition: `fn` builds the final response from the state; it
   * is stored in the transaction that marks the run completed and replayed
   * verbatim to every retry.
   *
   * @example
   * ```ts
   * const greet = workflow('greet')
   *   .input(z.object({ name: z.string() }))
   *   .phase('count', () => ({ greeted: 1 }))
   *   .respond(({ input, state }) => ({ status: 200, body: { hello: input.name, times: state.greeted } }))
   * ```
   * @throws WorkflowDefinitionError when what `.replaces()` was given does not fit (see there).
   */
  respond<B>(fn: (ctx: RunInfo<I, S>) => ResponseSpec<B> | Promise<ResponseSpec<B>>): Workflow<In, B> {
    const parts = { name: this.#name, schema: this.#schema, items: this.#items, options: this.#options };
    return finishedWorkflow(
      { ...parts, respond: fn as Definition["respond"], accepted: this.#accepted },
      this.#versioning,
    );
  }

  #add(item: Item): WorkflowBuilder<DB, In, I, never> {
    checkNewItem(this.#name, this.#items, item);
    return this.#copy<never>({ items: Object.freeze([...this.#items, item]) });
  }
}
