/**
 * What every test clock of one database handle and schema shares: how far
 * the stored instants have been moved back in all, where the schedules'
 * next ticks were left, and the queue that lets one advance run at a time.
 * Each clock moves the same rows, so each must read the same time: a clock
 * that counted only its own moves put a schedule's next tick where the cron
 * names it on a time hours off the other clock's, and the schedule ticked
 * twice a day.
 */
import type { ClockAccess } from "@idempo/core/internal";
import { ScheduleAlignment } from "./clock-schedules.js";

/** The time of one database handle's schema, as all of its clocks see it. */
export interface SchemaTime {
  /** How far the stored instants have been moved back in all, in ms. */
  offsetMs: number;
  readonly schedules: ScheduleAlignment;
  /** Run `work` after every advance or `runUntilIdle` of any clock of this schema asked for before. */
  serial<T>(work: () => Promise<T>): Promise<T>;
}

const times = new WeakMap<object, Map<string, SchemaTime>>();

/**
 * The shared time of the engine's database handle (the `db` given to
 * `createEngine`: a Kysely instance or a data layer) and schema; made by the first clock of them.
 */
export function schemaTime(access: ClockAccess): SchemaTime {
  let bySchema = times.get(access.handle);
  if (!bySchema) {
    bySchema = new Map();
    times.set(access.handle, bySchema);
  }
  const known = bySchema.get(access.schema);
  if (known) return known;
  // Two calls interleaving would each see the other's half-done steps.
  let queue: Promise<unknown> = Promise.resolve();
  const time: SchemaTime = {
    offsetMs: 0,
    schedules: new ScheduleAlignment(access),
    serial(work) {
      const next = queue.then(work);
      queue = next.catch(() => undefined);
      return next;
    },
  };
  bySchema.set(access.schema, time);
  return time;
}
