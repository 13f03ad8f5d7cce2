/**
 * Durable schedules against a real PostgreSQL: what `schedule` stores and
 * refuses, how a change or a pause moves the next tick, and workers that
 * fire each tick once. Verdicts count runs by the ticks' scheduled times;
 * none times anything.
 */
import { sql } from "kysely";
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, ScheduleRecord, WorkerOptions } from "../src/index.ts";
import {
  createEngine,
  type IdempoError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  InvalidOptionError,
  workflow,
} from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 10 });
const T = "acme";

const tick = workflow("sched_tick")
  .input(z.object({ schedule: z.string(), at: z.string() }))
  .phase("record", async ({ tx, input }) => {
    await sql`INSERT INTO tick_effects (schedule, at) VALUES (${input.schedule}, ${input.at})`.execute(tx);
    return {};
  })
  .respond(() => ({ status: 200, body: null }));

const counted = workflow("sched_counted")
  .input(z.object({ n: z.number().int().nonnegative() }))
  .phase("record", async ({ tx, input }) => {
    await sql`INSERT INTO tick_effects (schedule, at) VALUES ('counted', ${String(input.n)})`.execute(tx);
    return {};
  })
  .respond(() => ({ status: 200, body: null }));

async function reset(): Promise<void> {
  await sql`CREATE TABLE IF NOT EXISTS tick_effects (schedule text NOT NULL, at text NOT NULL)`.execute(t.db);
  await sql`TRUNCATE tick_effects`.execute(t.db);
  await sql`DELETE FROM idempo.schedules`.execute(t.db);
}
afterEach(reset);

function startWorker(engine: Engine, workflows: WorkerOptions["workflows"] = [tick]) {
  const w = engine.startWorker({ workflows, sweep: false, intervalMs: 200 });
  onTestFinished(() => w.stop());
  return w;
}

/** Runs started by schedule `name`, by tick time (from the key). */
async function runTicks(name: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT key FROM idempo.runs WHERE key LIKE ${`schedule:${name}:%`} ORDER BY key`.execute(t.db);
  return rows.map((r) => r.key.slice(`schedule:${name}:`.length));
}

async function effects(name: string): Promise<string[]> {
  const { rows } = await sql<{ at: string }>`
    SELECT at FROM tick_effects WHERE schedule = ${name} ORDER BY at`.execute(t.db);
  return rows.map((r) => r.at);
}

const until = async (check: () => Promise<boolean>, what: string) => {
  await expect.poll(check, { timeout: 120_000, interval: 50, message: what }).toBe(true);
};

async function row(name: string): Promise<ScheduleRecord> {
  const found = (await createEngine({ db: t.db }).listSchedules()).find((s) => s.name === name);
  if (!found) throw new Error(`no schedule ${name}`);
  return found;
}

describe("engine.schedule: what is stored", () => {
  it("stores the schedule with its next tick; the same definition again keeps its place; a new cron moves it", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    const first = await engine.schedule("nightly", { cron: "0 2 * * *", timezone: "utc", workflow: tick, tenantId: T });
    expect(first).toMatchObject({
      name: "nightly",
      tenantId: T,
      workflow: "sched_tick",
      cron: "0 2 * * *",
      timezone: "UTC",
      catchUp: "latest",
      graceMs: 60_000,
      hasInput: false,
      paused: false,
      lastTickAt: null,
    });
    expect(first.nextTickAt?.getUTCHours()).toBe(2);
    // Pretend the next tick were another instant: a second registration with the same cron must keep it.
    await sql`UPDATE idempo.schedules SET next_tick_at = '2030-01-01T02:00:00Z' WHERE name = 'nightly'`.execute(t.db);
    const again = await engine.schedule("nightly", {
      cron: "0 2 * * *",
      workflow: tick,
      tenantId: T,
      catchUp: "all",
    });
    expect(again.nextTickAt?.toISOString()).toBe("2030-01-01T02:00:00.000Z");
    expect(again.catchUp).toBe("all");
    const moved = await engine.schedule("nightly", { cron: "0 5 * * *", workflow: tick, tenantId: T });
    expect(moved.nextTickAt?.getUTCHours()).toBe(5);
    expect(moved.nextTickAt?.getTime()).toBeLessThan(new Date("2030-01-01").getTime());
    expect((await engine.listSchedules()).map((s) => s.name)).toEqual(["nightly"]);
    expect(await engine.unschedule("nightly")).toBe(true);
    expect(await engine.unschedule("nightly")).toBe(false);
    expect(await engine.listSchedules()).toEqual([]);
  });

  it("pause keeps a re-registered schedule paused; resume skips the ticks of the pause", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    await engine.schedule("p", { cron: "* * * * * *", workflow: tick, tenantId: T });
    expect((await engine.pauseSchedule("p"))?.paused).toBe(true);
    expect((await engine.schedule("p", { cron: "* * * * * *", workflow: tick, tenantId: T })).paused).toBe(true);
    await sql`UPDATE idempo.schedules SET next_tick_at = '2020-01-01T00:00:00Z' WHERE name = 'p'`.execute(t.db);
    const resumed = await engine.resumeSchedule("p");
    expect(resumed?.paused).toBe(false);
    const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(t.db);
    expect(resumed?.nextTickAt?.getTime()).toBeGreaterThan((rows[0] as { now: Date }).now.getTime() - 1000);
    expect(await engine.pauseSchedule("absent")).toBeNull();
    expect(await engine.resumeSchedule("absent")).toBeNull();
  });

  const bad: [string, () => Promise<unknown>, new (...a: never[]) => IdempoError, string][] = [
    ["a bad cron", () => sched("x", { cron: "every day" }), InvalidOptionError, "cron"],
    ["a cron that never ticks", () => sched("x", { cron: "0 0 30 2 *" }), InvalidOptionError, "cron"],
    ["an unknown time zone", () => sched("x", { timezone: "Europe/Atlantis" }), InvalidOptionError, "timezone"],
    [
      "a value that is not a workflow",
      () => sched("x", { workflow: { name: "sched_tick" } }),
      InvalidOptionError,
      "workflow",
    ],
    ["a name with a space", () => sched("nightly report", {}), InvalidOptionError, "name"],
    ["an empty name", () => sched("", {}), InvalidOptionError, "name"],
    ["a misspelt option", () => sched("x", { catchup: "all" }), InvalidOptionError, "catchup"],
    ["a bad catchUp", () => sched("x", { catchUp: "some" }), InvalidOptionError, "catchUp"],
    // A worker fires a tick after its instant, never at it: with no grace every tick is missed, and with
    // catchUp 'none' the schedule would never start a run.
    ["a graceMs no worker can meet", () => sched("x", { graceMs: 0, catchUp: "none" }), InvalidOptionError, "graceMs"],
    ["a graceMs under a second", () => sched("x", { graceMs: 999 }), InvalidOptionError, "graceMs"],
    ["a bad tenant", () => sched("x", { tenantId: "" }), InvalidIdempotencyKeyError, ""],
    ["an input the schema refuses", () => sched("x", { input: () => ({ at: 5 }) }), InputValidationError, ""],
  ];
  function sched(name: string, over: Record<string, unknown>) {
    const engine = createEngine({ db: t.db });
    return engine.schedule(name, { cron: "0 2 * * *", workflow: tick, tenantId: T, ...over } as never);
  }
  it.each(bad)("refuses %s with a typed error, writing nothing", async (_what, call, type, option) => {
    await reset();
    const error = await call().then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(type);
    expect((error as IdempoError).code).toMatch(/^[a-z_]+$/);
    if (option) expect((error as InvalidOptionError).option).toBe(option);
    expect(await createEngine({ db: t.db }).listSchedules()).toEqual([]);
  });
});

describe("workers fire each tick once", () => {
  it("two workers of two engines fire a schedule every second: one run per tick, no gap, each effect once", async () => {
    await reset();
    const a = createEngine({ db: t.db });
    const b = createEngine({ db: t.db });
    const s = await a.schedule("every-second", { cron: "* * * * * *", workflow: tick, tenantId: T, catchUp: "all" });
    const first = (s.nextTickAt as Date).getTime();
    startWorker(a);
    startWorker(b);
    const wanted = Array.from({ length: 8 }, (_, i) => new Date(first + i * 1000).toISOString());
    const last = wanted[7] as string;
    await until(async () => {
      const got = new Set(await runTicks("every-second"));
      return wanted.every((w) => got.has(w));
    }, "8 ticks fired");
    await until(async () => (await effects("every-second")).filter((k) => k <= last).length >= 8, "8 runs done");
    expect((await runTicks("every-second")).filter((k) => k <= last)).toEqual(wanted);
    expect((await effects("every-second")).filter((k) => k <= last)).toEqual(wanted);
  });

  it("a running worker fires nothing of a paused or deleted schedule, and fires again once it is resumed", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    await engine.schedule("toggled", { cron: "* * * * * *", workflow: tick, tenantId: T });
    startWorker(engine);
    await until(async () => (await runTicks("toggled")).length >= 1, "fired");
    // Once pause returned, the row is paused: a round that held it committed before (the row lock).
    await engine.pauseSchedule("toggled");
    const whilePaused = await runTicks("toggled");
    await sql`SELECT pg_sleep(2.5)`.execute(t.db);
    expect(await runTicks("toggled")).toEqual(whilePaused);
    const resumed = await engine.resumeSchedule("toggled");
    const firstAfter = (resumed as ScheduleRecord).nextTickAt?.toISOString() as string;
    await until(async () => (await runTicks("toggled")).includes(firstAfter), "fired after resume");
    // The ticks of the pause (at least two: it lasted 2.5 s of the database's clock) were skipped, not caught up.
    expect(Date.parse(firstAfter) - Date.parse(whilePaused.at(-1) as string)).toBeGreaterThan(2_000);
    const all = await runTicks("toggled");
    expect(all.filter((k) => k > (whilePaused.at(-1) as string) && k < firstAfter)).toEqual([]);
    expect(await engine.unschedule("toggled")).toBe(true);
    const whenDeleted = await runTicks("toggled");
    await sql`SELECT pg_sleep(2.5)`.execute(t.db);
    expect(await runTicks("toggled")).toEqual(whenDeleted);
  });

  it("a schedule made after the worker started wakes its firing loop (no wait for intervalMs)", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    // Nothing to fire at start: the loop would sleep the whole interval, far beyond this test's patience.
    const w = engine.startWorker({ workflows: [tick], sweep: false, intervalMs: 3_600_000 });
    onTestFinished(() => w.stop());
    await sql`SELECT pg_sleep(0.5)`.execute(t.db);
    const s = await engine.schedule("late", { cron: "* * * * * *", workflow: tick, tenantId: T });
    const first = (s.nextTickAt as Date).toISOString();
    await until(async () => (await effects("late")).includes(first), "the first tick ran");
  });

  it("a schedule with an input function is fired only by the engine that registered it", async () => {
    await reset();
    const owner = createEngine({ db: t.db });
    const other = createEngine({ db: t.db });
    await owner.schedule("counted", {
      cron: "* * * * * *",
      workflow: counted,
      tenantId: T,
      input: (tk) => ({ n: Math.floor(tk.at.getTime() / 1000) }),
    });
    startWorker(other, [counted]);
    // The other engine's worker runs `counted` but has no input function for the schedule: it fires nothing.
    await sql`SELECT pg_sleep(2.5)`.execute(t.db);
    expect(await runTicks("counted")).toEqual([]);
    startWorker(owner, [counted]);
    await until(async () => (await effects("counted")).length >= 2, "the owner fired and ran two ticks");
    const keys = await runTicks("counted");
    const inputs = await effects("counted");
    expect(inputs.slice(0, 2)).toEqual(keys.slice(0, 2).map((k) => String(Math.floor(new Date(k).getTime() / 1000))));
  });
});

describe("ticks missed while no worker ran follow catchUp", () => {
  // A yearly tick, its row set back to 2020: what a worker finds after years with no worker (none on time).
  it.each([
    ["none", [] as string[]],
    ["latest", ["2026-01-01T00:00:00.000Z"]],
    ["all", ["2020", "2021", "2022", "2023", "2024", "2025", "2026"].map((y) => `${y}-01-01T00:00:00.000Z`)],
  ] as const)("catchUp '%s'", async (catchUp, expected) => {
    await reset();
    const engine = createEngine({ db: t.db });
    const name = `yearly-${catchUp}`;
    await engine.schedule(name, { cron: "0 0 1 1 *", workflow: tick, tenantId: T, catchUp });
    await sql`UPDATE idempo.schedules SET next_tick_at = '2020-01-01T00:00:00Z' WHERE name = ${name}`.execute(t.db);
    startWorker(engine);
    await until(async () => (await row(name)).nextTickAt?.toISOString() === "2027-01-01T00:00:00.000Z", "caught up");
    expect(await runTicks(name)).toEqual(expected);
    await until(async () => (await effects(name)).length === expected.length, "runs done");
    expect(await effects(name)).toEqual(expected);
    expect((await row(name)).lastTickAt?.toISOString() ?? null).toBe(expected.at(-1) ?? null);
  });

  it("a change of input, workflow or catchUp applies from the next tick fired, pending ones included", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    const name = "changed";
    await engine.schedule(name, { cron: "0 0 1 1 *", workflow: tick, tenantId: T, catchUp: "none" });
    await sql`UPDATE idempo.schedules SET next_tick_at = '2024-01-01T00:00:00Z' WHERE name = ${name}`.execute(t.db);
    // Before any worker fired the pending ticks, the schedule changes everything but its cron.
    await engine.schedule(name, {
      cron: "0 0 1 1 *",
      workflow: counted,
      tenantId: T,
      catchUp: "all",
      input: (tk) => ({ n: tk.at.getUTCFullYear() }),
    });
    startWorker(engine, [counted]);
    await until(async () => (await effects("counted")).length === 3, "three runs");
    expect(await effects("counted")).toEqual(["2024", "2025", "2026"]);
    expect((await runTicks(name)).map((k) => k.slice(0, 4))).toEqual(["2024", "2025", "2026"]);
  });

  it("a tick whose input the schema refuses, or whose input function throws, is skipped with lastError; the next ticks go on", async () => {
    await reset();
    const engine = createEngine({ db: t.db });
    const name = "half-bad";
    await engine.schedule(name, {
      cron: "0 0 1 1 *",
      workflow: counted,
      tenantId: T,
      catchUp: "all",
      input: (tk) => {
        const year = tk.at.getUTCFullYear();
        if (year === 2023) throw Object.assign(new Error("no data for 2023"), { code: "ENOENT" });
        return { n: year === 2021 ? -1 : year };
      },
    });
    await sql`UPDATE idempo.schedules SET next_tick_at = '2020-01-01T00:00:00Z' WHERE name = ${name}`.execute(t.db);
    const errors: unknown[] = [];
    const w = engine.startWorker({
      workflows: [counted],
      sweep: false,
      intervalMs: 200,
      onError: (e) => errors.push(e),
    });
    onTestFinished(() => w.stop());
    await until(async () => (await row(name)).nextTickAt?.toISOString() === "2027-01-01T00:00:00.000Z", "caught up");
    const keys = await runTicks(name);
    expect(keys.map((k) => k.slice(0, 4))).toEqual(["2020", "2022", "2024", "2025", "2026"]);
    // The last error of the round is kept; the worker's onError heard of each.
    expect((await row(name)).lastError).toBe("tick 2023-01-01T00:00:00.000Z: no data for 2023");
    expect(errors.filter((e) => e instanceof InputValidationError)).toHaveLength(1);
    expect(errors.filter((e) => (e as Error).message === "no data for 2023")).toHaveLength(1);
  });
});
