/**
 * The schedule service: `schedule`, `unschedule`, `listSchedules`,
 * `pauseSchedule`, `resumeSchedule`; each registration is also kept in the
 * engine's `ScheduleRegistry` for its workers.
 */
import { ENQUEUE_REQUEST } from "../../options/known-options.js";
import {
  databaseNow,
  deleteSchedule,
  lockSchedule,
  selectSchedules,
  setPaused,
  upsertSchedule,
} from "../../store/schedules.js";
import { checkRequest } from "../admission/admission.js";
import type { EngineContext } from "../engine-context.js";
import { engineTransaction } from "../engine-db.js";
import type { ScheduleOptions, ScheduleTick } from "./schedule-options.js";
import { checkName, checkSchedule, tickKey } from "./schedule-options.js";
import type { ScheduleRecord } from "./schedule-record.js";
import { recordOf } from "./schedule-record.js";
import type { ScheduleRegistry } from "./schedule-registry.js";
import { cronOf } from "./ticks.js";

/** The input of a tick's run when the schedule has no input function. */
export function defaultInput(tick: ScheduleTick): { schedule: string; at: string } {
  return { schedule: tick.schedule, at: tick.at.toISOString() };
}

/** The engine's schedule verbs (see `Engine.schedule` and the others for their contracts). */
export interface ScheduleVerbs {
  schedule<In>(name: string, options: ScheduleOptions<In>): Promise<ScheduleRecord>;
  unschedule(name: string): Promise<boolean>;
  listSchedules(): Promise<ScheduleRecord[]>;
  pauseSchedule(name: string): Promise<ScheduleRecord | null>;
  resumeSchedule(name: string): Promise<ScheduleRecord | null>;
}

export function scheduleVerbs(ctx: EngineContext, registry: ScheduleRegistry): ScheduleVerbs {
  const { db, tables } = ctx;
  return {
    async schedule(name, options) {
      const s = checkSchedule(name, options);
      const now = await databaseNow(db);
      const next = s.rule.nextRun(now);
      // The input of the first tick is checked now, so a function that does not fit the schema fails here.
      const at = next ?? now;
      // A copy: an input function that changes its `at` (a Date) must not move the tick stored below.
      const tick: ScheduleTick = Object.freeze({ schedule: s.name, at: new Date(at), key: tickKey(s.name, at) });
      const input = s.input ? await s.input(tick) : defaultInput(tick);
      const request = { tenantId: s.tenantId, key: tick.key, input };
      await checkRequest(s.workflow.definition, request, `schedule '${s.name}'`, ENQUEUE_REQUEST, ctx.maxPayloadBytes);
      const row = await upsertSchedule(db, tables, {
        name: s.name,
        tenant_id: s.tenantId,
        workflow: s.workflow.name,
        cron: s.cron,
        timezone: s.timezone,
        catch_up: s.catchUp,
        grace_ms: s.graceMs,
        has_input: s.input !== undefined,
        next_tick_at: next,
      });
      registry.set(s.name, { workflow: s.workflow, input: s.input });
      return recordOf(row);
    },
    async unschedule(name) {
      checkName("unschedule", name);
      registry.delete(name);
      return deleteSchedule(db, tables, name);
    },
    async listSchedules() {
      return (await selectSchedules(db, tables)).map(recordOf);
    },
    async pauseSchedule(name) {
      checkName("pauseSchedule", name);
      return engineTransaction(ctx.layer, async (tx) => {
        const row = await lockSchedule(tx, tables, name);
        return row ? recordOf(await setPaused(tx, tables, name, true, undefined)) : null;
      });
    },
    async resumeSchedule(name) {
      checkName("resumeSchedule", name);
      return engineTransaction(ctx.layer, async (tx) => {
        const row = await lockSchedule(tx, tables, name);
        if (!row) return null;
        if (!row.paused) return recordOf(row);
        // The ticks of the pause are not missed ones: the next tick is the first after now.
        const next = cronOf(`schedule '${name}'`, row.cron, row.timezone).nextRun(await databaseNow(tx));
        return recordOf(await setPaused(tx, tables, name, false, next));
      });
    },
  };
}
