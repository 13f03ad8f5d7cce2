/**
 * `engine.overview` and `engine.listScheduleTicks` against runs made by the
 * engine itself: fixed counts (3 succeeded, 1 failed, 1 parked, 1 stuck, 1
 * swept to its tombstone, outbox messages), durations set to known values,
 * one run moved hours back so the hour and the day differ, and a schedule
 * whose missed ticks a worker fires. Verdicts are counts and exact
 * percentiles; nothing is timed.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Engine, Overview } from "../src/index.ts";
import { createEngine, InvalidOptionError, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const T = "ov";

const order = workflow("ov_order")
  .phase("create", () => ({ created: true }))
  .step("charge", () => ({ charged: true }))
  .phase("notify", async ({ outbox }) => {
    await outbox.enqueue("receipt", { ok: true });
    return {};
  })
  .respond(() => ({ status: 201, body: null }));

const refund = workflow("ov_refund")
  .phase("check", ({ fail }) => fail(422, { error: "too_late" }))
  .respond(() => ({ status: 200, body: null }));

/** A phase result JSON cannot store: the run parks at once. */
const poison = workflow("ov_poison")
  .phase("compute", () => ({ total: 10n as unknown as number }))
  .respond(() => ({ status: 200, body: null }));

/** Completed records expire at once, so a sweep leaves only their tombstones. */
const brief = workflow("ov_brief", { retentionMs: 1 })
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

const tick = workflow("ov_tick")
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

const HOURS_3 = 3 * 3_600_000;

let engine: Engine;
const t = useTestDatabase({ pool: 4 });

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
/** The bucket of `o` that holds `at`. */
const bucketOf = (o: Overview, at: Date) =>
  o.buckets.findIndex((b) => b.getTime() <= at.getTime() && at.getTime() < b.getTime() + o.bucketMs);

async function seed(): Promise<void> {
  engine = createEngine({ db: t.db });
  for (const key of ["o-1", "o-2", "o-3"]) await engine.runOnce(order, { tenantId: T, key, input: {} });
  await engine.runOnce(refund, { tenantId: T, key: "r-1", input: {} });
  await expect(engine.runOnce(poison, { tenantId: T, key: "p-1", input: {} })).rejects.toThrow();
  setFaultHook(engine, (p) => {
    if (p === "called:step:charge") throw new CrashSignal(p);
  });
  await expect(engine.runOnce(order, { tenantId: T, key: "s-1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
  setFaultHook(engine, undefined);
  await engine.release(T, "s-1"); // its owner is gone: the lease ends now, the run is stuck
  await engine.runOnce(brief, { tenantId: T, key: "b-1", input: {} });
  await new Promise((r) => setTimeout(r, 5));
  await engine.sweep();
  // Known durations: the runs took 100, 200 and 300 ms; their charge calls 10, 20 and 30 ms.
  for (const [key, ms] of [
    ["o-1", 100],
    ["o-2", 200],
    ["o-3", 300],
  ] as const) {
    await sql`UPDATE idempo.runs SET completed_at = created_at + ${ms} * interval '1 millisecond'
      WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
    await sql`UPDATE idempo.run_history SET finished_at = started_at + ${ms / 10} * interval '1 millisecond'
      WHERE tenant_id = ${T} AND key = ${key} AND name = 'charge'`.execute(t.db);
  }
}

describe("engine.overview", () => {
  it("counts what the tables hold: 3 succeeded, 1 failed, 1 parked, 1 stuck, 1 swept, with the durations set", async () => {
    await seed();
    const o = await engine.overview();
    expect(o.window).toBe("hour");
    expect(o.buckets).toHaveLength(60);
    expect(o.bucketMs).toBe(60_000);
    // The last bucket holds now; each starts on a whole minute.
    expect(bucketOf(o, o.now)).toBe(59);
    expect(o.buckets.every((b) => b.getTime() % 60_000 === 0)).toBe(true);
    // 3 orders, the refund, the poison, the stuck order; the swept run's record is gone, its tombstone counts as finished.
    expect(sum(o.started)).toBe(6);
    expect(sum(o.finished.succeeded)).toBe(4);
    expect(sum(o.finished.failed)).toBe(1);
    expect(sum(o.finished.errored) + sum(o.finished.canceled)).toBe(0);
    expect(o.parked.at(-1)).toBe(1);
    expect(o.stuck.at(-1)).toBe(1);
    expect(o.current).toEqual({ inFlight: 0, stuck: 1, parked: 1, suspended: 0, outboxPending: 3, outboxDead: 0 });
    expect(o.outboxBacklog.at(-1)).toBe(3);
    expect(o.outboxBacklog[0]).toBe(0);
    // The swept run has no record left to time; percentile_cont interpolates: p95 of 100, 200, 300 is 290.
    expect(o.workflowDurations.map((w) => [w.workflow, w.count])).toEqual([
      ["ov_order", 3],
      ["ov_refund", 1],
    ]);
    const orders = o.workflowDurations[0];
    expect(orders?.p50Ms).toBeCloseTo(200, 6);
    expect(orders?.p95Ms).toBeCloseTo(290, 6);
    expect(orders?.maxMs).toBeCloseTo(300, 6);
    const orderItems = o.itemDurations.filter((i) => i.workflow === "ov_order");
    // In the order they run; the stuck order's charge never finished and is not among them.
    expect(orderItems.map((i) => `${i.kind}:${i.name}:${i.count}`)).toEqual([
      "phase:create:4",
      "step:charge:3",
      "phase:notify:3",
    ]);
    expect(orderItems[1]?.p50Ms).toBeCloseTo(20, 6);
    expect(orderItems[1]?.p95Ms).toBeCloseTo(29, 6);
    expect(orderItems[1]?.failed).toBe(0);
  });

  it("the day holds what the hour does not: a run moved 3 hours back, and a parking older than the window", async () => {
    await sql`UPDATE idempo.runs SET created_at = created_at - ${HOURS_3} * interval '1 millisecond',
      completed_at = completed_at - ${HOURS_3} * interval '1 millisecond' WHERE tenant_id = ${T} AND key = 'o-1'`.execute(
      t.db,
    );
    await sql`UPDATE idempo.runs SET parked_at = parked_at - interval '2 days' WHERE tenant_id = ${T} AND key = 'p-1'`.execute(
      t.db,
    );
    const [hour, day] = await Promise.all([engine.overview({ window: "hour" }), engine.overview({ window: "day" })]);
    expect(sum(hour.started)).toBe(5);
    expect(sum(hour.finished.succeeded)).toBe(3);
    expect(day.buckets).toHaveLength(96);
    expect(day.bucketMs).toBe(15 * 60_000);
    expect(sum(day.started)).toBe(6);
    expect(sum(day.finished.succeeded)).toBe(4);
    const moved = (await engine.inspect(T, "o-1")) as { createdAt: Date };
    expect(day.started[bucketOf(day, moved.createdAt)]).toBe(1);
    // Parked before either window began: counted in every bucket.
    expect(hour.parked.every((n) => n === 1)).toBe(true);
    expect(day.parked.every((n) => n === 1)).toBe(true);
    expect(hour.workflowDurations.find((w) => w.workflow === "ov_order")).toMatchObject({ count: 2 });
    expect(hour.workflowDurations.find((w) => w.workflow === "ov_order")?.p50Ms).toBeCloseTo(250, 6);
  });

  it("refuses a window it does not know, and an unknown option", async () => {
    await expect(engine.overview({ window: "week" as "day" })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(engine.overview({ windw: "day" } as never)).rejects.toThrow(/windw/);
  });
});

describe("engine.listScheduleTicks", () => {
  it("the next ticks from the stored one, and the last ticks with the runs a worker started (none before it)", async () => {
    await engine.schedule("ov-minutely", { cron: "* * * * *", workflow: tick, tenantId: T, catchUp: "all" });
    // The schedule has existed for 10 minutes; its ticks from 3 minutes ago on were missed, the ones before skipped.
    await sql`UPDATE idempo.schedules SET created_at = now() - interval '10 minutes',
      next_tick_at = date_trunc('minute', now()) - interval '3 minutes' WHERE name = 'ov-minutely'`.execute(t.db);
    const from = ((await engine.listSchedules())[0] as { nextTickAt: Date }).nextTickAt;
    const worker = engine.startWorker({ workflows: [tick], sweep: false, intervalMs: 100 });
    try {
      await expect
        .poll(
          async () => {
            const [s] = await engine.listScheduleTicks({ next: 0, last: 3 });
            return s?.last.every((l) => l.run?.status === "completed") === true;
          },
          { timeout: 60_000, interval: 50 },
        )
        .toBe(true);
    } finally {
      await worker.stop();
    }
    const [s] = await engine.listScheduleTicks({ next: 3, last: 8 });
    const next = s?.schedule.nextTickAt as Date;
    expect(next.getTime()).toBeGreaterThan(from.getTime());
    expect(s?.next.map((d) => d.getTime())).toEqual([0, 1, 2].map((i) => next.getTime() + i * 60_000));
    const last = s?.last ?? [];
    expect(last.map((l) => l.at.getTime())).toEqual(last.map((_, i) => next.getTime() - (i + 1) * 60_000));
    for (const l of last) {
      expect(l.key).toBe(`schedule:ov-minutely:${l.at.toISOString()}`);
      if (l.at >= from) expect(l.run, l.key).toMatchObject({ status: "completed", outcome: "succeeded" });
      else expect(l.run, l.key).toBeNull();
    }
    expect(last.filter((l) => l.run === null).length).toBeGreaterThan(0);

    await engine.pauseSchedule("ov-minutely");
    const [paused] = await engine.listScheduleTicks();
    expect(paused?.next).toEqual([]);
    expect(paused?.last).toHaveLength(5);
  });

  it("lists a schedule whose zone this runtime does not know without ticks, instead of failing the list", async () => {
    await sql`UPDATE idempo.schedules SET timezone = 'Mars/Olympus_Mons' WHERE name = 'ov-minutely'`.execute(t.db);
    const [s] = await engine.listScheduleTicks();
    expect([s?.schedule.name, s?.next, s?.last]).toEqual(["ov-minutely", [], []]);
  });

  it("refuses counts out of range and unknown options", async () => {
    await expect(engine.listScheduleTicks({ next: -1 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(engine.listScheduleTicks({ last: 101 })).rejects.toThrow(/last must be an integer from 0 to 100/);
    await expect(engine.listScheduleTicks({ nxt: 1 } as never)).rejects.toThrow(/nxt/);
  });
});
