/** The branches of a `.parallel` item, declared with their own immutable builder. */
import { WorkflowDefinitionError } from "../errors.js";
import type { StepContext } from "./context.js";
import type { Branch, StepOptions } from "./definition.js";
import { checkName, checkStepOptions } from "./item-checks.js";

type Simplify<T> = { [K in keyof T]: T[K] } & {};

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
