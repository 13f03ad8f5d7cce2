/**
 * The test clock against a real PostgreSQL: a 7-day sleep, a 15-minute wait
 * timeout, a signal after 10 minutes of it, a lease's end and a schedule's
 * daily ticks all happen without real waiting; time never moves back. No
 * verdict times anything: each counts what the clock did and reads the runs.
 */
import { readFileSync } from "node:fs";
import { InvalidOptionError, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { INSTANT_COLUMNS } from "../src/clock-store.ts";
import { createTestClock, testEngine } from "../src/index.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const T = "clock";
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const trial = workflow("clock_trial")
  .input(z.object({ user: z.string() }))
  .phase("start", ({ input }) => ({ user: input.user }))
  .sleep("trial", 7 * DAY)
  .phase("convert", () => ({ converted: true }))
  .respond(({ state }) => ({ status: 200, body: state }));

const payment = workflow("clock_3ds")
  .input(z.object({ order: z.string() }))
  .phase("challenge", ({ input }) => ({ order: input.order }))
  .waitFor("three_ds", {
    schema: z.object({ outcome: z.string() }),
    timeoutMs: 15 * MINUTE,
    onTimeout: () => ({ outcome: "timed_out" }),
  })
  .respond(({ state }) => ({ status: 200, body: { outcome: state.three_ds.outcome } }));

const tick = workflow("clock_tick")
  .input(z.object({ schedule: z.string(), at: z.string() }))
  .phase("record", () => ({ ticked: true }))
  .respond(() => ({ status: 200, body: null }));

async function bodyOf(key: string) {
  const { rows } = await sql<{ status: string; response_body: unknown }>`
    SELECT status, response_body FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
  return rows[0];
}

describe("createTestClock", () => {
  it("refuses a negative, fractional, NaN or infinite advance, and unknown options", async () => {
    const engine = testEngine(t.db);
    const clock = createTestClock(engine, { workflows: [trial] });
    for (const ms of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "5" as unknown as number]) {
      await expect(clock.advance(ms)).rejects.toMatchObject({ code: "invalid_option", option: "ms" });
    }
    expect(clock.advancedMs).toBe(0);
    expect(() => createTestClock(engine, { workflows: [trial], maxStep: 3 } as never)).toThrow(InvalidOptionError);
    expect(() => createTestClock(engine, {} as never)).toThrow(InvalidOptionError);
    expect(() => createTestClock(engine, { workflows: [trial], maxRounds: 0 })).toThrow(InvalidOptionError);
  });

  it("runs a 7-day sleep and a 15-minute wait timeout without waiting for them", async () => {
    const engine = testEngine(t.db);
    const clock = createTestClock(engine, { workflows: [trial, payment] });
    expect((await engine.runOnce(trial, { tenantId: T, key: "sleep-1", input: { user: "u1" } })).status).toBe(202);
    expect((await engine.runOnce(payment, { tenantId: T, key: "wait-1", input: { order: "o1" } })).status).toBe(202);

    const first = await clock.advance(15 * MINUTE);
    expect(first.resumed).toEqual([expect.objectContaining({ key: "wait-1", status: 200, outcome: "succeeded" })]);
    expect(await bodyOf("wait-1")).toEqual({ status: "completed", response_body: { outcome: "timed_out" } });
    expect((await bodyOf("sleep-1"))?.status).toBe("suspended");

    // A minute short of the week: still asleep.
    expect((await clock.advance(7 * DAY - 16 * MINUTE)).resumed).toEqual([]);
    expect((await bodyOf("sleep-1"))?.status).toBe("suspended");
    const last = await clock.advance(MINUTE);
    expect(last.resumed.map((r) => r.key)).toEqual(["sleep-1"]);
    expect(await bodyOf("sleep-1")).toEqual({ status: "completed", response_body: { user: "u1", converted: true } });
    expect(clock.advancedMs).toBe(7 * DAY);
  });

  it("lets a signal that arrives after 10 minutes of a 15-minute wait win over the timeout", async () => {
    const engine = testEngine(t.db, { workflows: [payment] });
    const clock = createTestClock(engine, { workflows: [payment] });
    await engine.runOnce(payment, { tenantId: T, key: "wait-2", input: { order: "o2" } });
    expect((await clock.advance(10 * MINUTE)).resumed).toEqual([]);
    expect((await engine.inspect(T, "wait-2"))?.status).toBe("suspended");

    await engine.signal(T, "wait-2", "three_ds", { outcome: "authenticated" });
    expect((await clock.runUntilIdle()).resumed.map((r) => r.key)).toEqual(["wait-2"]);
    expect(await bodyOf("wait-2")).toEqual({ status: "completed", response_body: { outcome: "authenticated" } });
    // The old deadline passing changes nothing.
    expect((await clock.advance(10 * MINUTE)).resumed).toEqual([]);
    expect((await bodyOf("wait-2"))?.response_body).toEqual({ outcome: "authenticated" });
  });

  it("makes a crashed run's lease end, so it is taken over and finished", async () => {
    const engine = testEngine(t.db, { leaseMs: 10 * MINUTE });
    const clock = createTestClock(engine, { workflows: [trial] });
    setFaultHook(engine, (point) => {
      if (point === "before:phase:start") throw new CrashSignal(point);
    });
    await expect(engine.runOnce(trial, { tenantId: T, key: "stale-1", input: { user: "u2" } })).rejects.toBeInstanceOf(
      CrashSignal,
    );
    setFaultHook(engine, undefined);
    // The lease still holds: nothing to take over.
    expect((await clock.runUntilIdle()).resumed).toEqual([]);
    expect((await engine.inspect(T, "stale-1"))?.status).toBe("in_flight");

    const report = await clock.advance(10 * MINUTE);
    // Taken over at the lease's end, then asleep for the week.
    expect(report.resumed).toEqual([expect.objectContaining({ key: "stale-1", outcome: "suspended" })]);
    expect((await engine.inspect(T, "stale-1"))?.status).toBe("suspended");
  });

  it("fires a daily schedule once a day, on time, however far it is advanced", async () => {
    const engine = testEngine(t.db);
    const clock = createTestClock(engine, { workflows: [tick] });
    await engine.schedule("clock_daily", { cron: "0 3 * * *", timezone: "UTC", workflow: tick, tenantId: T });
    const runs = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs WHERE workflow = 'clock_tick' AND status = 'completed'`.execute(
        t.db,
      );
      return rows[0]?.n;
    };

    const three = await clock.advance(3 * DAY);
    expect(three.ticks).toBe(3);
    expect(three.tickErrors).toEqual([]);
    expect(await runs()).toBe(3);
    // Each tick was on time (none missed, so catch-up had nothing to do) and the next is a day after the last.
    const [record] = await engine.listSchedules();
    expect(record?.lastError).toBeNull();
    expect(((record?.nextTickAt?.getTime() ?? 0) - (record?.lastTickAt?.getTime() ?? 0)) / DAY).toBeCloseTo(1, 5);

    expect((await clock.advance(DAY)).ticks).toBe(1);
    expect(await runs()).toBe(4);
  });

  it("moves every instant the schema stores", () => {
    const schema = readFileSync(new URL("../../../migrations/current/schema.sql", import.meta.url), "utf8");
    const found: Record<string, string[]> = {};
    for (const [, table, body] of schema.matchAll(/CREATE TABLE (\w+) \(([\s\S]*?)\n\);/g)) {
      const columns = [...(body as string).matchAll(/^\s+(\w+)\s+timestamptz/gm)].map((m) => m[1] as string);
      if (columns.length > 0) found[table as string] = columns;
    }
    expect(found).toEqual(INSTANT_COLUMNS);
  });
});
