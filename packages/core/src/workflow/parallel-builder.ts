/** The branches of a `.parallel` item, declared with their own immutable builder. */
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import { PARALLEL_OPTIONS } from "../options/known-options.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import type { StepContext } from "./context.js";
import type { Branch, Item, ParallelOptions, StepOptions } from "./definition.js";
import { checkName, checkStepOptions } from "./item-checks.js";

/** A type with its intersections flattened, for readable hovers. */
type Simplify<T> = { [K in keyof T]: T[K] } & {};
/** The state after merging a phase or step result `O` into `S`. */
export type Merge<S, O> = O extends object ? Simplify<Omit<S, keyof O> & O> : S;

/** What a branch's result is in state: its value, with nothing returned stored as `null`. */
export type BranchResult<O> = O extends undefined | void ? null : O;

/**
 * The branches of one `.parallel` item: each `.step` adds a branch, a step
 * that runs at the same time as the others, with its own derived key,
 * started and recorded markers, retries, timeout and `reconcile` (the
 * options a `.step` takes). Immutable, like the workflow builder: every call
 * returns a new builder.
 *
 * `I` is the run's input, `S` the state before the parallel item (every
 * branch sees the same), `R` the results declared so far, by branch name.
 */
export class ParallelBuilder<I, S, R> {
  readonly #where: string;
  readonly #branches: readonly Branch[];

  /** @internal made by `.parallel` */
  constructor(where: string, branches: readonly Branch[] = Object.freeze([])) {
    this.#where = where;
    this.#branches = branches;
    Object.freeze(this);
  }

  /**
   * A branch: `fn` is called with `{ input, state, idempotencyKey, signal,
   * attempt, fail, reject }` like a step's, outside any transaction, while
   * the other branches run. Its result (any JSON value; nothing returned is
   * stored as `null`) is recorded as soon as it returns, so a crash after
   * it never calls it again.
   *
   * @example
   * ```ts
   * workflow('notify')
   *   .parallel('send', (p) => p
   *     .step('email', async ({ idempotencyKey }) => ({ messageId: await mailer.send({ idempotencyKey }) }))
   *     .step('sms', async ({ idempotencyKey }) => ({ smsId: await sms.send({ idempotencyKey }) }), { retries: 2 }))
   * ```
   * @throws WorkflowDefinitionError when `name` is already a branch of this item, or is not a valid name.
   * @throws InvalidOptionError when `options` is not an object, holds an unknown option, or one is of the wrong type or out of range.
   */
  step<N extends string, O>(
    name: N,
    fn: (ctx: StepContext<I, S>) => Promise<O> | O,
    options: StepOptions<I, S, O> = {},
  ): ParallelBuilder<I, S, Simplify<R & { [K in N]: BranchResult<O> }>> {
    checkName("branch", name);
    const where = `${this.#where}, branch '${name}'`;
    if (typeof fn !== "function") throw new WorkflowDefinitionError(`${where} needs a function`);
    checkStepOptions(where, options);
    if ((options as { rateLimit?: unknown }).rateLimit !== undefined) {
      // A branch does not take rate tokens (yet): refused rather than ignored.
      throw new InvalidOptionError(
        "rateLimit",
        `${where}: rateLimit is not supported on a parallel branch; use a step`,
      );
    }
    if (this.#branches.some((b) => b.name === name)) {
      throw new WorkflowDefinitionError(
        `${this.#where} already has a branch named '${name}'; branch names must be unique`,
      );
    }
    const branch: Branch = Object.freeze({
      name,
      run: fn as Branch["run"],
      options: Object.freeze({ ...options }) as Branch["options"],
    });
    return new ParallelBuilder(this.#where, Object.freeze([...this.#branches, branch]));
  }

  /** @internal The branches declared, in order. */
  get branches(): readonly Branch[] {
    return this.#branches;
  }
}

/**
 * The item `.parallel(name, build, options)` adds, its options and the
 * branches `build` declares checked (`where` names it in errors).
 *
 * @throws WorkflowDefinitionError when `build` is not a function or declares no branch.
 * @throws InvalidOptionError on an unknown option or a `concurrency` out of 1-1 000.
 */
export function parallelItem<I, S, R>(
  where: string,
  name: string,
  build: (p: ParallelBuilder<I, S, Record<never, never>>) => ParallelBuilder<I, S, R>,
  options: ParallelOptions,
): Item {
  checkOptions(where, PARALLEL_OPTIONS, options);
  intOption(where, "concurrency", options.concurrency, 1, 1_000);
  if (typeof build !== "function")
    throw new WorkflowDefinitionError(`${where} needs a function declaring its branches`);
  const built = build(new ParallelBuilder<I, S, Record<never, never>>(where)) as unknown;
  if (!(built instanceof ParallelBuilder) || built.branches.length === 0) {
    throw new WorkflowDefinitionError(
      `${where}: the function must return its branches, (p) => p.step('a', fn).step('b', fn), with at least one step`,
    );
  }
  return Object.freeze({ kind: "parallel", name, branches: built.branches, options: Object.freeze({ ...options }) });
}
