/**
 * Keeping schedules on the test clock's time. The engine computes a
 * schedule's ticks from the database clock (its next tick when the
 * schedule is made, the one after each tick it fires), which the test clock
 * never moves: after the clock has moved forward by `offsetMs`, those
 * computations are `offsetMs` behind. This file puts each next tick where
 * the cron expression names it on the clock's time, stored (like every
 * instant under the clock) `offsetMs` earlier.
 */
import type { ClockAccess } from "@idempo/core/internal";
import { databaseNow, moveNextTick, scheduleTimes } from "./clock-store.js";

/** The schedules' next ticks as the clock last left them, by schedule name (ms since the epoch, as stored). */
export class ScheduleAlignment {
  readonly #known = new Map<string, number>();
  readonly #access: ClockAccess;

  constructor(access: ClockAccess) {
    this.#access = access;
  }

  /** The stored next ticks moved back by `ms` along with every instant. */
  shifted(ms: number): void {
    for (const [name, at] of this.#known) this.#known.set(name, at - ms);
  }

  /** The due schedules before a firing round, by name, with their stored tick. */
  async dueNow(): Promise<Map<string, Date>> {
    const { db, schema } = this.#access;
    return new Map((await scheduleTimes(db, schema)).filter((s) => s.due).map((s) => [s.name, s.nextTickAt]));
  }

  /**
   * After a firing round: each schedule of `fired` the round moved on gets
   * the tick after the one it fired, on the clock's time; any schedule the
   * clock has not seen yet (made or resumed after the clock moved) gets its
   * first tick after the clock's now.
   */
  async align(offsetMs: number, fired: ReadonlyMap<string, Date>): Promise<void> {
    const { db, schema } = this.#access;
    const now = (await databaseNow(db)).getTime();
    for (const s of await scheduleTimes(db, schema)) {
      const stored = s.nextTickAt.getTime();
      if (this.#known.get(s.name) === stored) continue;
      const firedAt = fired.get(s.name);
      // Nothing to correct while the clock has not moved: the engine's own arithmetic is on time.
      if (offsetMs === 0 || (firedAt !== undefined && firedAt.getTime() === stored)) {
        this.#known.set(s.name, stored);
        continue;
      }
      const after = (firedAt ? firedAt.getTime() : now) + offsetMs;
      const next = this.#access.nextTick(s.cron, s.timezone, new Date(after));
      await moveNextTick(db, schema, s.name, s.nextTickAt, next && new Date(next.getTime() - offsetMs));
      if (next) this.#known.set(s.name, next.getTime() - offsetMs);
      else this.#known.delete(s.name);
    }
  }
}
