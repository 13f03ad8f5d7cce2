/**
 * Pausing and resuming a schedule from the console: the same engine calls
 * as `idempo schedules pause|resume`, behind a confirmation page that says
 * what the change does to the schedule's ticks.
 */
import type { Engine, ScheduleRecord } from "@idempo/core";

/** One verb on a schedule. */
export interface ScheduleAction {
  readonly verb: "pause" | "resume";
  readonly label: string;
  /** Whether it changes the schedule as it is now (a paused one cannot be paused again). */
  applies(schedule: ScheduleRecord): boolean;
  /** The confirmation question: what will change. */
  question(schedule: ScheduleRecord): string;
  perform(engine: Engine, name: string): Promise<ScheduleRecord | null>;
}

/** Both verbs. */
export const SCHEDULE_ACTIONS: readonly ScheduleAction[] = [
  {
    verb: "pause",
    label: "Pause schedule",
    applies: (s) => !s.paused,
    question: (s) =>
      `Pause schedule ${s.name}: no tick of it starts a run until it is resumed, and the ticks of the pause are ` +
      "skipped, not caught up. Runs it started already go on. It stays paused when the application calls schedule() again.",
    perform: (engine, name) => engine.pauseSchedule(name),
  },
  {
    verb: "resume",
    label: "Resume schedule",
    applies: (s) => s.paused,
    question: (s) =>
      `Resume schedule ${s.name}: it fires again from the first tick of ${s.cron} (${s.timezone}) after now; ` +
      "the ticks of the pause are not caught up.",
    perform: (engine, name) => engine.resumeSchedule(name),
  },
];

/** The verb of a path segment (`schedule-pause`, `schedule-resume`), or undefined. */
export function scheduleAction(segment: string): ScheduleAction | undefined {
  return SCHEDULE_ACTIONS.find((a) => `schedule-${a.verb}` === segment);
}
