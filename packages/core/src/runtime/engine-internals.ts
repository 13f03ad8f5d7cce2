/**
 * What `@idempo/core/internal` reaches of an engine that the public API does
 * not give: the one-shot resume of due runs (`idempo resume`, the test
 * clock) and the test clock's access (the database handle and schema, a
 * firing round of the schedules, a schedule's next tick). Not part of the
 * supported API. `createEngine` attaches one record of these to the engine
 * it makes; the entries below look it up, so a frozen engine keeps no
 * hidden fields and an object that only looks like an engine is refused.
 */
import type { Workflow } from "../workflow/definition.js";
import type { DueReport, ResumeDueOptions } from "./background/resume-due.js";

/** Runs a statement (placeholders `$1` to `$n`) and returns its rows. */
export interface ClockStatements {
  query<R>(text: string, values: readonly unknown[]): Promise<R[]>;
}

/** An engine's internals as the test clock uses them. */
export interface ClockAccess {
  /** The `db` given to `createEngine`, as it was given: what tells two engines on one database apart from two databases. */
  readonly handle: object;
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

/** Everything `createEngine` hands over about itself, in one record. */
export interface EngineInternals {
  /** What the test clock reaches. */
  readonly clock: ClockAccess;
  /** How this engine resumes due runs once (see {@link resumeDue}). */
  resumeDue(options: ResumeDueOptions): Promise<DueReport>;
}

const internals = new WeakMap<object, EngineInternals>();

/** Called by `createEngine`, once per engine. */
export function attachInternals(engine: object, record: EngineInternals): void {
  internals.set(engine, record);
}

function internalsOf(engine: object, who: string): EngineInternals {
  const record = internals.get(engine);
  if (!record) throw new TypeError(`${who} needs an engine made by createEngine`);
  return record;
}

/**
 * The internals of an engine made by `createEngine`, for the test clock of
 * `@idempo/testing`. Nothing here moves any clock.
 *
 * @throws TypeError when `engine` was not made by `createEngine`.
 */
export function clockAccessOf(engine: object): ClockAccess {
  return internalsOf(engine, "the test clock").clock;
}

/**
 * Resume the due suspended runs of `options.workflows` once, without a
 * worker: what `idempo resume` does for runs whose sleep ended, whose
 * awaited signal arrived or whose wait timed out, and for enqueued runs.
 * Takes them (each tenant's oldest first, at most `limit`) with the
 * statement a worker uses and runs each from its recovery point to its next
 * stop, one after another. Safe beside running workers and client retries:
 * each run is taken by one of them. Returns the {@link DueReport}.
 *
 * @param engine an engine made by `createEngine`.
 * @throws TypeError when `engine` was not made by `createEngine`.
 * @throws WorkflowDefinitionError / InvalidOptionError on bad options, as `resumeStale`.
 */
export function resumeDue(engine: object, options: ResumeDueOptions): Promise<DueReport> {
  return internalsOf(engine, "resumeDue").resumeDue(options);
}
