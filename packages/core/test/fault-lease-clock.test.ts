/**
 * Fault kind "lease from the application clock": the lease of a run is
 * decided by the database clock, never by the clock of the process that
 * holds it. Application servers drift (a VM resumed from a snapshot, a bad
 * NTP source), and the database is the one clock every attempt shares. With
 * the process clock 10 minutes behind, a lease computed from it would read
 * as already expired (a retry would take a live run over); 10 minutes ahead,
 * a crashed run would stay blocked for 10 minutes.
 *
 * The skew replaces `Date` in this test file's worker only (vitest runs
 * each file in its own worker); timers stay real.
 */
import { sql } from "kysely";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, IdempotencyKeyInProgressError } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { countOrders, deferred, rejectionOf } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
// Minutes, not seconds: a slow machine must never let a live lease lapse before it is read,
// and a 10-minute skew still lands outside (0, LEASE_MS] when leases follow the app clock.
const LEASE_MS = 300_000;
const TEN_MINUTES = 10 * 60_000;
const input = { cartId: "c1", amountCents: 500 };
const RealDate = Date;

/** Move this process's clock (`Date.now()` and `new Date()`) by `offsetMs`. */
function skewClock(offsetMs: number): void {
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(RealDate.now() + offsetMs);
      else super(...(args as [string]));
    }
    static override now(): number {
      return RealDate.now() + offsetMs;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}

afterEach(() => {
  globalThis.Date = RealDate;
});

async function lockedUntil(key: string): Promise<number> {
  const { rows } = await sql<{ ms: number }>`
    SELECT (extract(epoch FROM locked_until) * 1000)::float8 AS ms FROM idempo.runs WHERE tenant_id = 'clk' AND key = ${key}
  `.execute(t.db);
  return rows[0]?.ms ?? Number.NaN;
}

describe("leases follow the database clock, whatever the application clock says", () => {
  it("with the app clock 10 minutes behind, a live run reads as live and a retry gets 409", async () => {
    skewClock(-TEN_MINUTES);
    const { workflow } = makeCheckout(new FakePayments(), { name: "clk_behind" });
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const reached = deferred();
    const release = deferred();
    setFaultHook(engine, async (point, run) => {
      // Before anything commits: the lease is still the claim's.
      if (point !== "before:phase:create_order" || run.attempt !== 1) return;
      reached.resolve();
      await release.promise;
    });
    const first = engine.runOnce(workflow, { tenantId: "clk", key: "behind", input });
    await reached.promise;

    const rec = await engine.inspect("clk", "behind");
    expect(rec).toMatchObject({ status: "in_flight", attempt: 1 });
    expect(rec?.leaseRemainingMs).toBeGreaterThan(0);
    expect(rec?.leaseRemainingMs).toBeLessThanOrEqual(LEASE_MS);
    expect((await engine.listKeys({ stuck: true })).items.map((r) => r.key)).not.toContain("behind");

    const busy = await rejectionOf(engine.runOnce(workflow, { tenantId: "clk", key: "behind", input }));
    expect(busy).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect((busy as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
    expect((busy as IdempotencyKeyInProgressError).retryAfterMs).toBeLessThanOrEqual(LEASE_MS);
    const stale = await engine.resumeStale({ workflows: [workflow] });
    expect(stale.resumed).toEqual([]);
    expect((await engine.inspect("clk", "behind"))?.attempt).toBe(1);

    release.resolve();
    expect(await first).toMatchObject({ status: 201, replayed: false });
    expect(await countOrders(t.db)).toBe(1);
  });

  it("with the app clock 10 minutes behind, the heartbeat extends the lease on the database clock", async () => {
    skewClock(-TEN_MINUTES);
    const { workflow } = makeCheckout(new FakePayments(), { name: "clk_renew" });
    // The heartbeat renews every 50 ms; the run waits at a boundary until a renewal has moved the lease.
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS, heartbeatMs: 50 });
    const reached = deferred();
    const release = deferred();
    setFaultHook(engine, async (point) => {
      if (point !== "after:phase:create_order") return;
      reached.resolve();
      await release.promise;
    });
    const first = engine.runOnce(workflow, { tenantId: "clk", key: "renew", input });
    await reached.promise;
    const committed = await lockedUntil("renew");
    const renewed = await waitFor(async () => {
      const now = await lockedUntil("renew");
      return now !== committed ? now : undefined;
    }, 300_000);
    expect(renewed).toBeGreaterThan(committed);
    const rec = await engine.inspect("clk", "renew");
    expect(rec?.leaseRemainingMs).toBeGreaterThan(0);
    expect(rec?.leaseRemainingMs).toBeLessThanOrEqual(LEASE_MS);
    release.resolve();
    expect(await first).toMatchObject({ status: 201, replayed: false });
  });

  it("with the app clock 10 minutes ahead, a crashed run's lease still runs out after leaseMs", async () => {
    skewClock(TEN_MINUTES);
    const { workflow, counters } = makeCheckout(new FakePayments(), { name: "clk_ahead" });
    const shortLease = 500;
    const engine = createEngine({ db: t.db, leaseMs: shortLease });
    let crashes = 0;
    setFaultHook(engine, (point, run) => {
      if (point === "before:phase:create_order" && run.attempt === 1 && crashes++ === 0) throw new CrashSignal(point);
    });
    const crash = await rejectionOf(engine.runOnce(workflow, { tenantId: "clk", key: "ahead", input }));
    expect(crash).toBeInstanceOf(CrashSignal);
    const rec = await engine.inspect("clk", "ahead");
    expect(rec?.leaseRemainingMs).toBeLessThanOrEqual(shortLease);

    // The lease runs out by the database clock; a generous deadline only bounds a broken build.
    await waitFor(async () => {
      const stuck = await engine.listKeys({ stuck: true });
      return stuck.items.some((r) => r.key === "ahead") ? true : undefined;
    }, 300_000);
    const resumed = await engine.runOnce(workflow, { tenantId: "clk", key: "ahead", input });
    expect(resumed).toMatchObject({ status: 201, replayed: false });
    expect((await engine.inspect("clk", "ahead"))?.attempt).toBe(2);
    expect(counters.create_order).toBe(1);
  });
});
