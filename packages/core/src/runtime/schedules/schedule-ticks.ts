/**
 * `engine.listScheduleTicks`: each schedule's next ticks, computed from its
 * cron expression by the same croner rule that fires them, and its last
 * ticks with the run each started (found by the tick's key, see
 * store/tick-runs.ts), for the console's schedules page and overview.
 */
import { InvalidOptionError } from "../../errors.js";
import { LIST_SCHEDULE_TICKS_OPTIONS } from "../../options/known-options.js";
import { checkOptions, describeValue } from "../../options/option-shape.js";
import type { Executor, RunOutcome, RunStatus, Tables } from "../../store/run-store.js";
import { databaseNow, selectSchedules } from "../../store/schedules.js";
import { selectTickRuns } from "../../store/tick-runs.js";
import { tickKey } from "./schedule-options.js";
import type { ScheduleRecord } from "./schedule-record.js";
import { recordOf } from "./schedule-record.js";
import { cronOf } from "./ticks.js";

/** Options of `listScheduleTicks`. */
export interface ListScheduleTicksOptions {
  /** Next ticks per schedule, 0 to 1 000 (Default: 5). */
  next?: number;
  /** Last ticks per schedule, with their runs, 0 to 100 (Default: 5). */
  last?: number;
}

/** The run a past tick started, as it stands now; `status: 'expired'` once only its tombstone is left. */
export interface TickRun {
  readonly status: RunStatus | "expired";
  readonly outcome: RunOutcome | null;
  /** Null for a tombstone. */
  readonly attempt: number | null;
  /** Null for a tombstone. */
  readonly createdAt: Date | null;
  readonly completedAt: Date | null;
}

/** One past tick: its time, the key of its run, and the run (null when the tick started none). */
export interface PastTick {
  readonly at: Date;
  readonly key: string;
  readonly run: TickRun | null;
}

/** One schedule with its next and last ticks. */
export interface ScheduleTicks {
  readonly schedule: ScheduleRecord;
  /**
   * The next ticks, oldest first, from `nextTickAt` on: a tick already due
   * (no worker fired it yet) comes first. Empty while paused (a resume
   * starts from the first tick after then), when no tick is left, and
   * when this runtime cannot read the cron expression or zone.
   */
  readonly next: readonly Date[];
  /**
   * The ticks of the expression before those, newest first, since the
   * schedule was created. A tick without a run was skipped: missed and not
   * caught up, paused, or its input refused (see `lastError`); ticks of an
   * expression the schedule had before its cron or zone changed are not among them.
   */
  readonly last: readonly PastTick[];
}

function count(options: ListScheduleTicksOptions | undefined, name: "next" | "last", max: number): number {
  const value = options?.[name] ?? 5;
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new InvalidOptionError(
      name,
      `listScheduleTicks: ${name} must be an integer from 0 to ${max}, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** The schedule's croner rule, or null when this runtime refuses its expression or zone. */
function ruleOf(s: ScheduleRecord) {
  try {
    return cronOf(`schedule '${s.name}'`, s.cron, s.timezone);
  } catch {
    // cronOf refuses what it can tell (InvalidOptionError); croner throws a TypeError for a zone it cannot convert.
    return null;
  }
}

/** Every schedule by name with its next and last ticks; see `Engine.listScheduleTicks`. */
export async function listScheduleTicks(
  db: Executor,
  tables: Tables,
  options?: ListScheduleTicksOptions,
): Promise<ScheduleTicks[]> {
  checkOptions("listScheduleTicks", LIST_SCHEDULE_TICKS_OPTIONS, options);
  const nextCount = count(options, "next", 1_000);
  const lastCount = count(options, "last", 100);
  const [rows, now] = await Promise.all([selectSchedules(db, tables), databaseNow(db)]);
  const planned = rows.map((row) => {
    const s = recordOf(row);
    const rule = ruleOf(s);
    // A row this runtime cannot read (a zone its time-zone data lacks) is listed without ticks, not a failed list.
    if (rule === null) return { s, next: [] as Date[], last: [] as { at: Date; key: string }[] };
    const first = s.paused ? null : s.nextTickAt;
    const next = first === null || nextCount === 0 ? [] : [first, ...rule.nextRuns(nextCount - 1, first)];
    // The ticks before the next one were all fired or skipped; while paused, those up to now.
    const before = first ?? now;
    const last =
      lastCount === 0 ? [] : rule.previousRuns(lastCount, before).filter((at) => at < before && at > s.createdAt);
    return { s, next, last: last.map((at) => ({ at, key: tickKey(s.name, at) })) };
  });
  const keys = planned.flatMap((p) => p.last.map((t) => ({ tenantId: p.s.tenantId, key: t.key })));
  const found = new Map((await selectTickRuns(db, tables, keys)).map((r) => [r.i, r]));
  let i = 0;
  return planned.map((p) =>
    Object.freeze({
      schedule: p.s,
      next: p.next,
      last: p.last.map((t): PastTick => {
        const r = found.get(i++);
        const run: TickRun | null = r
          ? {
              status: r.status,
              outcome: r.outcome,
              attempt: r.attempt,
              createdAt: r.created_at,
              completedAt: r.completed_at,
            }
          : null;
        return { at: t.at, key: t.key, run };
      }),
    }),
  );
}
