/**
 * What `@idempo/testing`'s test clock needs of an engine that the public
 * API does not give: its database handle and schema, a firing round of its
 * schedules, and a schedule's next tick. Not part of the supported API: the
 * engine attaches it to itself, as it does its due-run resumer, and
 * `@idempo/core/internal` reaches it; nothing here moves any clock.
 */
import type { Workflow } from "../workflow/definition.js";

/** Runs a statement (placeholders `$1` to `$n`) and returns its rows. */
export interface ClockStatements {
  query<R>(text: string, values: readonly unknown[]): Promise<R[]>;
}

/** An engine's internals as the test clock uses them. */
export interface ClockAccess {
  /** The engine's database, through its data layer, in autocommit. */
  readonly db: ClockStatements;
  /** Run `body` in one transaction of the engine's data layer. */
  inTransaction<T>(body: (tx: ClockStatements) => Promise<T>): Promise<T>;
  /** The engine's schema (createEngine's `schema`). */
  readonly schema: string;
  /**
   * One firing round of the due schedules of this engine's registrations
   * and of `workflows` (as a worker given them fires); returns the ticks
   * fired or skipped. Errors of single ticks go to `onError`.
   */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  fireSchedules(workflows: readonly Workflow<any, any>[], onError: (error: unknown) => void): Promise<number>;
  /** The first tick of `cron` in `timezone` strictly after `after`, or null when it has none left. */
  nextTick(cron: string, timezone: string, after: Date): Date | null;
}

const accesses = new WeakMap<object, ClockAccess>();

/** Called by `createEngine`. */
export function attachClockAccess(engine: object, access: ClockAccess): void {
  accesses.set(engine, access);
}

/**
 * The internals of an engine made by `createEngine`, for the test clock.
 *
 * @throws TypeError when `engine` was not made by `createEngine`.
 */
export function clockAccessOf(engine: object): ClockAccess {
  const access = accesses.get(engine);
  if (!access) throw new TypeError("the test clock needs an engine made by createEngine");
  return access;
}
