/**
 * Faults of a schedule's firing that its own input could cause:
 * - an `input` function that changes the `tick.at` it was given (a `Date`,
 *   `setUTCHours(0, 0, 0, 0)` to get the day) moved the schedule's next
 *   tick to that instant, years back, so the workers started runs for
 *   ticks that were never due; at firing it made `lastTickAt` lie;
 * - an `input` function that never answers held the firing transaction,
 *   and with it the schedule's row lock, for as long as the process lived:
 *   no other worker could fire the schedule, and `pauseSchedule` waited;
 * - an `input` function whose error message held a NUL made the round's
 *   write of `lastError` fail (a text column refuses NUL), so the round
 *   rolled back, every round: the schedule never got past that tick and
 *   no later tick fired; a 100 kB message was stored whole;
 * - a due schedule that this runtime cannot compute (a zone its time-zone
 *   database does not know) was looked at again every 100 ms, each time
 *   with a raw error of the cron library, instead of once per `intervalMs`.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { createEngine, InvalidOptionError, WorkflowUsageError, workflow } from "../src/index.ts";
import { clockAccessOf } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const T = "acme";

const daily = workflow("sched_input_daily")
  .input(z.object({ day: z.string() }))
  .phase("record", () => ({}))
  .respond(() => ({ status: 200, body: null }));

const ticked = workflow("sched_input_ticked")
  .input(z.object({ schedule: z.string(), at: z.string() }))
  .phase("record", () => ({}))
  .respond(() => ({ status: 200, body: null }));

async function runKeys(name: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT key FROM idempo.runs WHERE key LIKE ${`schedule:${name}:%`} ORDER BY key`.execute(t.db);
  return rows.map((r) => r.key.slice(`schedule:${name}:`.length));
}

async function stored(name: string) {
  const { rows } = await sql<{ next_tick_at: Date; last_tick_at: Date | null; last_error: string | null }>`
    SELECT next_tick_at, last_tick_at, last_error FROM idempo.schedules WHERE name = ${name}`.execute(t.db);
  return rows[0];
}

/** Set a yearly schedule back to this year's tick, the one missed tick before now (`catchUp: 'latest'` fires it). */
async function dueThisYear(name: string): Promise<string> {
  const { rows } = await sql<{ at: Date }>`
    UPDATE idempo.schedules SET next_tick_at = date_trunc('year', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHERE name = ${name} RETURNING next_tick_at AS at`.execute(t.db);
  return (rows[0] as { at: Date }).at.toISOString();
}

/** The tick's day, computed by changing the `Date` it was given, as careless code does. */
const dayOf = (at: Date) => {
  at.setUTCFullYear(2000);
  return { day: at.toISOString().slice(0, 10) };
};

describe("a schedule's input function", () => {
  it("that changes tick.at leaves the next tick where the cron names it", async () => {
    const engine = createEngine({ db: t.db });
    const record = await engine.schedule("mutating", {
      cron: "0 2 * * *",
      workflow: daily,
      tenantId: T,
      input: (tick) => dayOf(tick.at),
    });
    const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(t.db);
    const now = (rows[0] as { now: Date }).now.getTime();
    expect(record.nextTickAt?.getTime()).toBeGreaterThan(now);
    expect((await stored("mutating"))?.next_tick_at.getTime()).toBe(record.nextTickAt?.getTime());
  });

  it("that changes tick.at when fired changes neither the run's key nor lastTickAt", async () => {
    const engine = createEngine({ db: t.db });
    await engine.schedule("mutating-fired", {
      cron: "0 0 1 1 *",
      workflow: daily,
      tenantId: T,
      catchUp: "latest",
      input: (tick) => dayOf(tick.at),
    });
    await dueThisYear("mutating-fired");
    const errors: unknown[] = [];
    expect(await clockAccessOf(engine).fireSchedules([daily], (e) => errors.push(e))).toBe(1);
    expect(errors).toEqual([]);
    const [key] = await runKeys("mutating-fired");
    expect(key?.slice(0, 4)).not.toBe("2000");
    expect((await stored("mutating-fired"))?.last_tick_at?.toISOString()).toBe(key);
  });

  it("that never answers gives the row up after the lease; a later round fires the tick", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 1_000 });
    let calls = 0;
    await engine.schedule("hanging", {
      cron: "0 0 1 1 *",
      workflow: daily,
      tenantId: T,
      // The first call is schedule()'s own check; the second, the first firing, never answers.
      input: (tick) => (++calls === 2 ? new Promise<never>(() => {}) : { day: tick.at.toISOString().slice(0, 10) }),
    });
    const due = await dueThisYear("hanging");
    const errors: unknown[] = [];
    const access = clockAccessOf(engine);
    // Bounded here too, so that the unfixed engine fails this test instead of hanging the file.
    const first = await Promise.race([
      access.fireSchedules([daily], (e) => errors.push(e)),
      new Promise((resolve) => setTimeout(() => resolve("still waiting"), 30_000).unref()),
    ]);
    expect(first).toBe(0);
    expect(errors).toEqual([expect.any(WorkflowUsageError)]);
    expect((errors[0] as Error).message).toMatch(/schedule 'hanging'.*did not answer within 1000 ms/);
    // Nothing of that round stayed: the row is free (a pause takes its lock) and the tick still due.
    expect(await runKeys("hanging")).toEqual([]);
    await engine.pauseSchedule("hanging");
    await engine.resumeSchedule("hanging");
    await dueThisYear("hanging");
    expect(await access.fireSchedules([daily], (e) => errors.push(e))).toBe(1);
    expect(await runKeys("hanging")).toEqual([due]);
  });
});

describe("a tick whose input function fails", () => {
  it("with a NUL or a huge message in its error is skipped like any other; the later ticks fire", async () => {
    const engine = createEngine({ db: t.db });
    const { rows } = await sql<{ year: number }>`
      SELECT extract(year FROM now() AT TIME ZONE 'UTC')::int AS year`.execute(t.db);
    const thisYear = (rows[0] as { year: number }).year;
    await engine.schedule("nul-error", {
      cron: "0 0 1 1 *",
      workflow: daily,
      tenantId: T,
      catchUp: "all",
      input: (tick) => {
        if (tick.at.getUTCFullYear() < thisYear) throw new Error(`bad name 'a\u0000b' ${"x".repeat(100_000)}`);
        return { day: tick.at.toISOString().slice(0, 10) };
      },
    });
    const due = await dueThisYear("nul-error");
    await sql`UPDATE idempo.schedules SET next_tick_at = next_tick_at - interval '1 year' WHERE name = 'nul-error'`.execute(
      t.db,
    );
    const errors: unknown[] = [];
    expect(await clockAccessOf(engine).fireSchedules([daily], (e) => errors.push(e))).toBe(2);
    expect(errors).toHaveLength(1);
    expect(await runKeys("nul-error")).toEqual([due]);
    const row = await stored("nul-error");
    expect(row?.last_error).toMatch(/^tick \d{4}-01-01T00:00:00.000Z: bad name 'a\\u0000b' x+…$/);
    // About 1 000 characters (a NUL is stored as its 6-character escape), not the 100 kB message.
    expect(row?.last_error?.length).toBeLessThan(1_100);
    expect(row?.next_tick_at.getTime()).toBeGreaterThan(Date.parse(due));
  });
});

describe("a due schedule this runtime cannot compute", () => {
  it("is refused with InvalidOptionError naming the zone, and a worker looks at it once per intervalMs", async () => {
    const engine = createEngine({ db: t.db });
    await engine.schedule("unknown-zone", { cron: "* * * * *", workflow: ticked, tenantId: T });
    // As a process with a newer time-zone database could have stored it.
    await sql`UPDATE idempo.schedules SET timezone = 'Mars/Olympus_Mons', paused = true WHERE name = 'unknown-zone'`.execute(
      t.db,
    );
    await expect(engine.resumeSchedule("unknown-zone")).rejects.toMatchObject({
      code: "invalid_option",
      option: "timezone",
    });
    await sql`UPDATE idempo.schedules SET paused = false, next_tick_at = now() - interval '1 second'
      WHERE name = 'unknown-zone'`.execute(t.db);
    const errors: unknown[] = [];
    const worker = engine.startWorker({
      workflows: [ticked],
      sweep: false,
      intervalMs: 3_600_000,
      onError: (e) => errors.push(e),
    });
    onTestFinished(() => worker.stop());
    await expect.poll(() => errors.length, { timeout: 60_000, interval: 50 }).toBeGreaterThan(0);
    expect(errors[0]).toBeInstanceOf(InvalidOptionError);
    // A tight loop would have looked again many times by now; the interval is an hour.
    await sql`SELECT pg_sleep(1.5)`.execute(t.db);
    expect(errors).toHaveLength(1);
  });
});
