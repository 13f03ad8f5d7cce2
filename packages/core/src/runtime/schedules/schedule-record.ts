import type { ScheduleRow } from "../../store/schedules.js";
import type { CatchUp } from "./schedule-options.js";

/** A stored schedule, as `listSchedules` and the schedule verbs return it. Times are the database clock's. */
export interface ScheduleRecord {
  readonly name: string;
  readonly tenantId: string;
  /** The workflow's name. */
  readonly workflow: string;
  readonly cron: string;
  /** The IANA zone the expression is read in. */
  readonly timezone: string;
  readonly catchUp: CatchUp;
  readonly graceMs: number;
  /** True when the input comes from a function given to `schedule` (only its processes fire it). */
  readonly hasInput: boolean;
  /** Paused schedules fire nothing; resuming skips the ticks of the pause. */
  readonly paused: boolean;
  /** The first tick not yet fired; null when the expression names no further tick. */
  readonly nextTickAt: Date | null;
  /** The last tick a run was started for, and when that was. */
  readonly lastTickAt: Date | null;
  readonly lastFiredAt: Date | null;
  /** Why the last tick fired could not start its run (an input that fails the schema...); null when it did. */
  readonly lastError: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export function recordOf(row: ScheduleRow): ScheduleRecord {
  return Object.freeze({
    name: row.name,
    tenantId: row.tenant_id,
    workflow: row.workflow,
    cron: row.cron,
    timezone: row.timezone,
    catchUp: row.catch_up,
    graceMs: row.grace_ms,
    hasInput: row.has_input,
    paused: row.paused,
    nextTickAt: row.next_tick_at,
    lastTickAt: row.last_tick_at,
    lastFiredAt: row.last_fired_at,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  });
}
