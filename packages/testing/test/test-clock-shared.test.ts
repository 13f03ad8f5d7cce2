/**
 * Faults of the kind "two clocks, two times": each test clock kept its own
 * idea of how far time had moved, while every clock of one database moves
 * the same stored instants. A second clock on the same engine (or on
 * another engine of the same database handle, as a test file that makes
 * an engine per test has) put a daily schedule's next tick where the cron
 * names it on its own time, hours off the other's, and the schedule ticked
 * more often than once a day. And an advance too large for PostgreSQL's
 * timestamps failed with the driver's "timestamp out of range" instead of
 * the clock's own error.
 */
import { InvalidOptionError, workflow } from "@idempo/core";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { TestClock } from "../src/index.ts";
import { createTestClock, testEngine } from "../src/index.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const T = "clocks";
const HOUR = 3_600_000;

const tick = workflow("shared_clock_tick")
  .input(z.object({ schedule: z.string(), at: z.string() }))
  .phase("record", () => ({}))
  .respond(() => ({ status: 200, body: null }));

async function runsOf(name: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE key LIKE ${`schedule:${name}:%`}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

/** Five days in 5-hour steps, taken in turns by `clocks`: a daily schedule ticks exactly five times. */
async function fiveDays(clocks: readonly TestClock[]): Promise<number> {
  let ticks = 0;
  for (let i = 0; i < 24; i++) ticks += (await (clocks[i % clocks.length] as TestClock).advance(5 * HOUR)).ticks;
  return ticks;
}

describe("test clocks of one database agree on the time", () => {
  it("two clocks on one engine", async () => {
    const engine = testEngine(t.db);
    const clocks = [createTestClock(engine, { workflows: [tick] }), createTestClock(engine, { workflows: [tick] })];
    const before = clocks[0]?.advancedMs ?? 0;
    await engine.schedule("one-engine", { cron: "0 3 * * *", timezone: "UTC", workflow: tick, tenantId: T });
    expect(await fiveDays(clocks)).toBe(5);
    expect(await runsOf("one-engine")).toBe(5);
    // Both read the time every clock of this database moved.
    expect(clocks.map((c) => c.advancedMs - before)).toEqual([120 * HOUR, 120 * HOUR]);
    await engine.unschedule("one-engine");
  });

  it("a clock per engine, two engines on one database handle", async () => {
    const first = testEngine(t.db);
    const second = testEngine(t.db);
    const clocks = [createTestClock(first, { workflows: [tick] }), createTestClock(second, { workflows: [tick] })];
    await first.schedule("two-engines", { cron: "0 3 * * *", timezone: "UTC", workflow: tick, tenantId: T });
    await second.schedule("two-engines", { cron: "0 3 * * *", timezone: "UTC", workflow: tick, tenantId: T });
    expect(await fiveDays(clocks)).toBe(5);
    expect(await runsOf("two-engines")).toBe(5);
    await first.unschedule("two-engines");
  });

  it("refuses an advance beyond what PostgreSQL's timestamps hold, moving nothing", async () => {
    const clock = createTestClock(testEngine(t.db), { workflows: [tick] });
    const before = clock.advancedMs;
    for (const ms of [Number.MAX_SAFE_INTEGER, 1e15]) {
      const error = await clock.advance(ms).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({ code: "invalid_option", option: "ms" });
    }
    expect(clock.advancedMs).toBe(before);
  });
});
