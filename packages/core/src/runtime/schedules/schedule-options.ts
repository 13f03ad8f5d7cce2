/**
 * What `engine.schedule(name, options)` accepts, and its checks: every
 * problem is refused before anything is written, with an error naming the
 * option.
 */
import type { Cron } from "croner";
import { InvalidOptionError } from "../../errors.js";
import { assertValidRunKey } from "../../keys/key-validation.js";
import { SCHEDULE_OPTIONS } from "../../options/known-options.js";
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions, describeValue } from "../../options/option-shape.js";
import type { CatchUpMode } from "../../store/schedules.js";
import type { Workflow } from "../../workflow/definition.js";
import { canonicalZone, cronOf } from "./ticks.js";

/** What to do with the ticks missed while no worker ran (see `ScheduleOptions.catchUp`). */
export type CatchUp = CatchUpMode;

/** One tick of a schedule, as its `input` function sees it. */
export interface ScheduleTick {
  /** The schedule's name. */
  readonly schedule: string;
  /** The instant the cron expression named (not when a worker got to it); a fresh copy for each call. */
  readonly at: Date;
  /** The key of the run this tick starts: `schedule:<name>:<at as ISO 8601 UTC>`. */
  readonly key: string;
}

/** Options of `engine.schedule(name, options)`. */
export interface ScheduleOptions<In> {
  /**
   * When to tick: a cron expression of 5 fields (`minute hour day-of-month
   * month day-of-week`, e.g. `'0 3 * * *'`) or 6 with seconds first
   * (`'*\/10 * * * * *'`), or a nickname (`'@daily'`), as croner reads it.
   */
  cron: string;
  /** The IANA time zone the expression is read in (Default: `'UTC'`), e.g. `'Europe/Berlin'`. */
  timezone?: string;
  /** The workflow each tick starts a run of. */
  workflow: Workflow<In, unknown>;
  /** The tenant the runs belong to (the key rules apply). */
  tenantId: string;
  /**
   * The input of a tick's run, from the tick (Default: `{ schedule, at }`,
   * `at` as an ISO 8601 string). Called in the process that fires the tick,
   * so only processes that called `schedule` with it fire this schedule;
   * it must be a pure function of the tick (two workers may both call it
   * for one tick). Also called once by `schedule` itself, for the first
   * tick, to check its result against the workflow's schema. A firing
   * round waits for it at most the workflow's lease, then rolls back (the
   * tick is fired again by a later round); an error it throws skips the tick.
   */
  input?: (tick: ScheduleTick) => In | Promise<In>;
  /**
   * Ticks missed while no worker ran, found when one starts again (Default:
   * `'latest'`): `'none'` skips them, `'latest'` starts one run for the
   * most recent of them, `'all'` starts one for each (the 1 000 most recent
   * at most). A tick counts as missed once it is more than `graceMs` old.
   * (After the misfire instructions of Quartz's cron triggers: do nothing,
   * fire once now, fire every missed time.)
   */
  catchUp?: CatchUp;
  /**
   * How late, in ms, a tick may be fired and still count as on time
   * (Default: 60 000; at least 1 000, since a worker always fires a tick a
   * little after its instant). On-time ticks always start their run,
   * whatever `catchUp` says.
   */
  graceMs?: number;
}

/** The options once checked: what the row holds, and the process-side parts. */
export interface CheckedSchedule {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  readonly rule: Cron;
  readonly workflow: Workflow<unknown, unknown>;
  readonly tenantId: string;
  readonly input: ((tick: ScheduleTick) => unknown) | undefined;
  readonly catchUp: CatchUp;
  readonly graceMs: number;
}

/** Letters, digits, `.`, `_` and `-`, starting with a letter or digit: it goes into every tick's key. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const CATCH_UP: readonly CatchUp[] = ["none", "latest", "all"];

/**
 * The key of the run of one tick: a pure function of the schedule's name
 * and the tick's instant, so every worker that fires the tick names the
 * same run.
 */
export function tickKey(name: string, at: Date): string {
  return `schedule:${name}:${at.toISOString()}`;
}

/**
 * A schedule's name.
 *
 * @throws InvalidOptionError (`name`) unless it is 1-128 letters, digits, `.`, `_` or `-`, starting with a letter or digit.
 */
export function checkName(where: string, name: unknown): string {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new InvalidOptionError(
      "name",
      `${where}: a schedule's name must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or ` +
        `digit, got ${describeValue(name)}`,
    );
  }
  return name;
}

/** The least `graceMs`: a worker fires a tick after its instant, never at it (its wake-up, then a round's statements). */
const MIN_GRACE_MS = 1_000;

/** `graceMs`, from {@link MIN_GRACE_MS}: with less, every tick would be missed, and `catchUp: 'none'` would fire none. */
function graceOf(where: string, value: unknown): number {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && value < MIN_GRACE_MS) {
    throw new InvalidOptionError(
      "graceMs",
      `${where}: graceMs must be at least ${MIN_GRACE_MS.toLocaleString("en")} ms, got ${value}: a worker fires a ` +
        "tick a little after its instant, so with less every tick would count as missed (and catchUp 'none' fire none)",
    );
  }
  return intOption(where, "graceMs", value, MIN_GRACE_MS, MAX_TIMER_MS, 60_000);
}

/**
 * Check `schedule(name, options)` before any SQL.
 *
 * @throws InvalidOptionError a bad name, an unknown option, a cron expression croner refuses, an unknown time
 *   zone, a workflow that is not a finished one, a bad `catchUp` or `graceMs`.
 * @throws InvalidIdempotencyKeyError a bad tenant id.
 */
export function checkSchedule(name: unknown, options: unknown): CheckedSchedule {
  const checkedName = checkName("schedule", name);
  const where = `schedule '${checkedName}'`;
  checkOptions(where, SCHEDULE_OPTIONS, options);
  const o = options as ScheduleOptions<unknown>;
  const timezone = canonicalZone(where, o.timezone ?? "UTC");
  const rule = cronOf(where, o.cron, timezone);
  if (!o.workflow?.definition?.items) {
    throw new InvalidOptionError(
      "workflow",
      `${where}: workflow must be a workflow built with workflow(...).respond(...), got ${describeValue(o.workflow)}`,
    );
  }
  assertValidRunKey(o.tenantId, tickKey(checkedName, new Date(0)));
  const catchUp = o.catchUp ?? "latest";
  if (!CATCH_UP.includes(catchUp)) {
    throw new InvalidOptionError(
      "catchUp",
      `${where}: catchUp must be 'none', 'latest' or 'all', got ${describeValue(catchUp)}`,
    );
  }
  return {
    name: checkedName,
    cron: o.cron,
    timezone,
    rule,
    workflow: o.workflow,
    tenantId: o.tenantId,
    input: o.input,
    catchUp,
    graceMs: graceOf(where, o.graceMs),
  };
}
