import type { z } from "zod";
import { WorkflowDefinitionError } from "../errors.js";
import type { JsonValue } from "../json/json-value.js";
import { hasLoneSurrogate } from "../json/json-value.js";
import type { PhaseContext, ResponseSpec, RunInfo, StepContext } from "./context.js";
import type { Definition, Item, StepOptions, Workflow, WorkflowOptions } from "./definition.js";
import { outlineHash } from "./definition.js";

type Simplify<T> = { [K in keyof T]: T[K] } & {};
/** The state after merging a phase or step result `O` into `S`. */
type Merge<S, O> = O extends object ? Simplify<Omit<S, keyof O> & O> : S;

/** What a phase or step may return: an object merged into `state`, or nothing. */
export type StateUpdate = object | undefined | void;

const NAME_MAX = 100;

function checkName(what: string, name: unknown): asserts name is string {
  if (
    typeof name !== "string" ||
    name.length === 0 ||
    name.length > NAME_MAX ||
    /[\u0000-\u001F\u007F]/.test(name) ||
    hasLoneSurrogate(name)
  ) {
    throw new WorkflowDefinitionError(
      `${what} name must be a non-empty string of at most ${NAME_MAX} characters without control characters, got ${JSON.stringify(name)}`,
    );
  }
}

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
  readonly #options: Readonly<WorkflowOptions>;

  /** @internal use {@link workflow} */
  constructor(name: string, schema: z.ZodType | undefined, items: readonly Item[], options: Readonly<WorkflowOptions>) {
    this.#name = name;
    this.#schema = schema;
    this.#items = items;
    this.#options = options;
    Object.freeze(this);
  }

  /**
   * Validate input with a zod schema before anything is claimed. Invalid
   * input raises `InputValidationError` (400) and leaves no row. The
   * fingerprint is taken from the raw input, before zod defaults or stripping.
   */
  input<Z extends z.ZodType>(schema: Z): WorkflowBuilder<DB, z.input<Z>, z.output<Z>, S> {
    if (this.#items.length > 0)
      throw new WorkflowDefinitionError(`workflow '${this.#name}': call .input() before the first phase or step`);
    return new WorkflowBuilder(this.#name, schema, this.#items, this.#options);
  }

  /**
   * An atomic phase: `fn` runs inside a transaction on the engine's
   * database; its writes, the returned state and the advance of the recovery
   * point to `name` commit together, fenced on the owner token.
   *
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   */
  phase<O extends StateUpdate>(
    name: string,
    fn: (ctx: PhaseContext<DB, I, S>) => Promise<O> | O,
  ): WorkflowBuilder<DB, In, I, Merge<S, O>> {
    return this.#add(Object.freeze({ kind: "phase", name, run: fn as Item["run"] }) as Item);
  }

  /**
   * A step: a call to another system, run outside any transaction with a
   * derived `idempotencyKey`. Its result is recorded (and merged into
   * `state`) before the run moves on; a recorded step is never called again.
   *
   * @throws WorkflowDefinitionError when `name` is already used in this workflow.
   */
  step<O extends StateUpdate>(
    name: string,
    fn: (ctx: StepContext<I, S>) => Promise<O> | O,
    options: StepOptions<I, S, O> = {},
  ): WorkflowBuilder<DB, In, I, Merge<S, O>> {
    return this.#add(Object.freeze({ kind: "step", name, run: fn, options: Object.freeze({ ...options }) }) as Item);
  }

  /**
   * Finish the definition: `fn` builds the final response from the state; it
   * is stored in the transaction that marks the run completed and replayed
   * verbatim to every retry.
   */
  respond<B>(fn: (ctx: RunInfo<I, S>) => ResponseSpec<B> | Promise<ResponseSpec<B>>): Workflow<In, B> {
    const outline = this.#items.map((i) => `${i.kind}:${i.name}`);
    const definition: Definition = Object.freeze({
      name: this.#name,
      schema: this.#schema,
      items: this.#items,
      respond: fn as Definition["respond"],
      options: this.#options,
      outline: Object.freeze(outline),
      hash: outlineHash(outline),
    });
    return Object.freeze({ name: this.#name, definition });
  }

  #add(item: Item): WorkflowBuilder<DB, In, I, never> {
    checkName(item.kind, item.name);
    if (typeof item.run !== "function") {
      throw new WorkflowDefinitionError(`workflow '${this.#name}': ${item.kind} '${item.name}' needs a function`);
    }
    const clash = this.#items.find((i) => i.name === item.name);
    if (clash) {
      throw new WorkflowDefinitionError(
        `workflow '${this.#name}' already has a ${clash.kind} named '${item.name}'; phase and step names must be unique`,
      );
    }
    return new WorkflowBuilder(this.#name, this.#schema, Object.freeze([...this.#items, item]), this.#options);
  }
}

/**
 * Start a workflow definition. The name is stored with every run and is part
 * of the request fingerprint, so the same key used for another workflow is a
 * mismatch (422).
 *
 * @example
 * const checkout = workflow<Database>('checkout')
 *   .input(z.object({ cartId: z.string(), amountCents: z.number().int().positive() }))
 *   .phase('create_order', async ({ tx, input }) => ({ orderId: await insertOrder(tx, input) }))
 *   .step('charge', async ({ state, idempotencyKey }) => ({ chargeId: await charge(state.orderId, idempotencyKey) }))
 *   .respond(({ state }) => ({ status: 201, body: state }))
 *
 * @param name 1-100 characters, no control characters.
 * @param options retention, lease and error policy; see {@link WorkflowOptions}.
 * @throws WorkflowDefinitionError on a bad name or option.
 */
export function workflow<DB = unknown>(
  name: string,
  options: WorkflowOptions = {},
): WorkflowBuilder<DB, JsonValue, JsonValue, Record<never, never>> {
  checkName("workflow", name);
  const bound = options.attemptTimeoutMs;
  if (bound !== undefined && (!Number.isSafeInteger(bound) || bound < 1 || bound > 2_147_483_647)) {
    throw new WorkflowDefinitionError(
      `workflow '${name}': attemptTimeoutMs must be an integer of milliseconds from 1 to 2 147 483 647 (Node's timer limit)`,
    );
  }
  for (const field of ["retentionMs", "leaseMs"] as const) {
    const v = options[field];
    if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
      throw new WorkflowDefinitionError(`workflow '${name}': ${field} must be a positive integer of milliseconds`);
    }
  }
  const max = options.maxAttempts;
  if (max !== undefined && (!Number.isSafeInteger(max) || max < 1 || max > 10_000)) {
    throw new WorkflowDefinitionError(`workflow '${name}': maxAttempts must be an integer from 1 to 10 000`);
  }
  if (options.onUnknownError !== undefined && !["retry", "store"].includes(options.onUnknownError)) {
    throw new WorkflowDefinitionError(`workflow '${name}': onUnknownError must be 'retry' or 'store'`);
  }
  return new WorkflowBuilder(name, undefined, Object.freeze([]), Object.freeze({ ...options }));
}
