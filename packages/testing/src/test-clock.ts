import type { Engine, Workflow } from "@idempo/core";
import { InvalidOptionError, WorkflowUsageError } from "@idempo/core";
import {
  ARRAY,
  checkOptions,
  clockAccessOf,
  describeValue,
  INTEGER,
  optionShape,
  resumeDue,
} from "@idempo/core/internal";
import { schemaTime } from "./clock-state.js";
import { msToNextInstant, shiftInstants } from "./clock-store.js";

/** Rounds of {@link TestClock.runUntilIdle} when `maxRounds` is not given. */
const DEFAULT_MAX_ROUNDS = 1_000;
/** Instants one {@link TestClock.advance} stops at when `maxSteps` is not given. */
const DEFAULT_MAX_STEPS = 10_000;
/** Runs taken per round, of the due ones and of the stale ones each. */
const RUNS_PER_ROUND = 100;
/** How far the clocks of one schema may move time in all: 1 000 years keep every stored instant in PostgreSQL's range. */
const MAX_ADVANCED_MS = 1_000 * 365.25 * 24 * 3_600_000;

const OPTIONS = optionShape({ workflows: ARRAY, maxRounds: INTEGER, maxSteps: INTEGER }, ["workflows"]);

/** Options of {@link createTestClock}. */
export interface TestClockOptions {
  /** The workflow definitions the clock runs when their runs become due, as for `engine.startWorker`. */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  readonly workflows: readonly Workflow<any, any>[];
  /** Most rounds of one `runUntilIdle` (each: fire due ticks, run due and stale runs), 1 or more (Default: 1 000). */
  readonly maxRounds?: number;
  /** Most instants one `advance` stops at, 1 or more (Default: 10 000). */
  readonly maxSteps?: number;
}

/** A run the clock took and ran to its next stop (a response, or `outcome: 'suspended'`). */
export interface ClockRun {
  readonly tenantId: string;
  readonly key: string;
  readonly workflow: string;
  readonly status: number;
  readonly outcome: string;
}

/** What one `advance` or `runUntilIdle` did, in the order it happened. */
export interface ClockReport {
  /** Schedule ticks fired (or skipped on an error of theirs). */
  readonly ticks: number;
  /** Runs that were due (a sleep ended, a wait timed out or got its signal, an enqueued run) or stale (lease ended), each run to its next stop. */
  readonly resumed: readonly ClockRun[];
  /** Runs whose resumption raised, with the error. */
  readonly failed: readonly { tenantId: string; key: string; workflow: string; error: Error }[];
  /** Stale runs parked instead of resumed (their attempts ran out). */
  readonly parked: readonly { tenantId: string; key: string; workflow: string; reason: string }[];
  /** Errors of schedule ticks that started no run. */
  readonly tickErrors: readonly unknown[];
}

/** A clock for one engine's database schema, moving forward only when told. See {@link createTestClock}. */
export interface TestClock {
  /**
   * Move the engine's time forward by `ms`, stopping at each instant on the
   * way at which something becomes due (a wake-up, a wait's timeout, a lease
   * end, a schedule's tick, an outbox retry) and running what is due there
   * until idle, so every tick fires on time and in order.
   *
   * @param ms a non-negative integer of milliseconds.
   * @throws InvalidOptionError (`ms`) when `ms` is negative, not an integer, NaN or infinite, or would move
   *   the time of this database's clocks more than 1 000 years forward in all.
   * @throws WorkflowUsageError when more than `maxSteps` instants fall in the range.
   */
  advance(ms: number): Promise<ClockReport>;
  /**
   * Without moving time: fire due schedule ticks, run due runs and take over
   * stale ones, again until a round finds nothing to do.
   *
   * @throws WorkflowUsageError when it is still not idle after `maxRounds` rounds.
   */
  runUntilIdle(): Promise<ClockReport>;
  /**
   * How far the engine's time has been moved forward in all, in ms: by this
   * clock and by every other clock of the same database handle (the Kysely
   * given to `createEngine`) and schema, which move the same stored instants.
   */
  readonly advancedMs: number;
}

/** A report to add rounds to. */
function emptyReport() {
  return {
    ticks: 0,
    resumed: [] as ClockRun[],
    failed: [] as ClockReport["failed"][number][],
    parked: [] as ClockReport["parked"][number][],
    tickErrors: [] as unknown[],
  };
}

/**
 * A test clock for one engine: time moves forward only on request, so a
 * 7-day `.sleep`, a 15-minute `.waitFor` timeout, a lease's end or a
 * schedule's next tick happens in a test without real waiting. The engine
 * still reads only the database clock; the test clock moves every instant
 * stored in the engine's schema back instead (wake-ups, wait deadlines,
 * leases, retention and tombstone times, outbox retries, schedule ticks),
 * which is the same for every decision the engine makes. Time never moves
 * back. Nothing of it exists in production: only a test that calls this
 * function moves anything, and only in the engine's own schema. The idea
 * of stepping from one due instant to the next is Temporal's time-skipping
 * test server.
 *
 * Runs the clock finds due are run in the caller (as `idempo resume` does),
 * schedules registered with `engine.schedule` are fired by it, and stale
 * runs are taken over by `resumeStale`; run no worker beside it.
 *
 * @param engine an engine made by `createEngine` (or `testEngine`).
 * @param options `workflows` (required), `maxRounds`, `maxSteps`.
 * @returns the clock. Clocks of one database handle and schema share their
 *   time: `advancedMs` starts where the earlier ones left it (0 for the first).
 * @throws InvalidOptionError when an option is unknown or of the wrong type.
 * @throws TypeError when `engine` was not made by `createEngine`.
 *
 * @example
 * ```ts
 * const DAY = 24 * 60 * 60 * 1000
 * const trial = workflow("trial")
 *   .input(z.object({ user: z.string() }))
 *   .sleep("trial_period", 7 * DAY)
 *   .phase("convert", () => ({ converted: true }))
 *   .respond(({ state }) => ({ status: 200, body: state }))
 * const clock = createTestClock(engine, { workflows: [trial] })
 * await engine.runOnce(trial, { tenantId: "t", key: "u-1", input: { user: "u-1" } }) // 202: asleep for 7 days
 * const report = await clock.advance(7 * DAY) // report.resumed[0]: { key: "u-1", status: 200, ... }
 * ```
 */
export function createTestClock(engine: Engine, options: TestClockOptions): TestClock {
  checkOptions("createTestClock", OPTIONS, options);
  const access = clockAccessOf(engine);
  const workflows = [...options.workflows];
  const maxRounds = options.maxRounds ?? DEFAULT_MAX_ROUNDS;
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
  for (const [name, value] of [
    ["maxRounds", maxRounds],
    ["maxSteps", maxSteps],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new InvalidOptionError(
        name,
        `createTestClock: ${name} must be an integer of 1 or more, got ${describeValue(value)}`,
      );
    }
  }
  // Every clock of this database handle and schema moves the same rows: they share one time and one queue.
  const time = schemaTime(access);
  const { schedules } = time;

  async function round(report: ReturnType<typeof emptyReport>): Promise<boolean> {
    const due = await schedules.dueNow();
    const ticks = await access.fireSchedules(workflows, (e) => report.tickErrors.push(e));
    await schedules.align(time.offsetMs, due);
    const woken = await resumeDue(engine, { workflows, limit: RUNS_PER_ROUND });
    const stale = await engine.resumeStale({ workflows, limit: RUNS_PER_ROUND });
    report.ticks += ticks;
    report.resumed.push(...woken.resumed, ...stale.resumed);
    report.failed.push(...woken.failed, ...stale.failed);
    report.parked.push(...stale.parked);
    const acted = woken.resumed.length + woken.failed.length + stale.resumed.length + stale.failed.length;
    return ticks > 0 || acted + stale.parked.length > 0;
  }

  async function untilIdle(report: ReturnType<typeof emptyReport>): Promise<void> {
    for (let n = 0; n < maxRounds; n++) if (!(await round(report))) return;
    throw new WorkflowUsageError(
      `clock.runUntilIdle: still work to do after ${maxRounds} rounds (maxRounds); a run or schedule keeps becoming due at once`,
    );
  }

  async function shift(ms: number): Promise<void> {
    await shiftInstants(access, access.schema, ms);
    time.offsetMs += ms;
    schedules.shifted(ms);
  }

  return {
    advance(ms) {
      if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0) {
        return Promise.reject(
          new InvalidOptionError(
            "ms",
            `clock.advance: ms must be a non-negative integer of milliseconds (time never moves back), got ${describeValue(ms)}`,
          ),
        );
      }
      return time.serial(async () => {
        if (ms > MAX_ADVANCED_MS - time.offsetMs) {
          throw new InvalidOptionError(
            "ms",
            `clock.advance: the clocks of this database may move its time at most 1 000 years forward in all ` +
              `(its stored instants must stay in PostgreSQL's range); ${time.offsetMs} ms are behind it, got ${describeValue(ms)}`,
          );
        }
        const report = emptyReport();
        await schedules.align(time.offsetMs, new Map());
        await untilIdle(report);
        let left = ms;
        for (let steps = 0; left > 0; steps++) {
          if (steps === maxSteps) {
            throw new WorkflowUsageError(
              `clock.advance: more than ${maxSteps} instants (maxSteps) fall within ${ms} ms; advance by less at a time`,
            );
          }
          const gap = await msToNextInstant(access.db, access.schema);
          const step = gap === null ? left : Math.min(left, Math.max(1, gap));
          await shift(step);
          left -= step;
          await untilIdle(report);
        }
        return report;
      });
    },
    runUntilIdle() {
      return time.serial(async () => {
        const report = emptyReport();
        await schedules.align(time.offsetMs, new Map());
        await untilIdle(report);
        return report;
      });
    },
    get advancedMs() {
      return time.offsetMs;
    },
  };
}
