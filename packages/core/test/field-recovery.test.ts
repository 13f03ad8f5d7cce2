/**
 * Field fault of the kind "recovery (takeover boundary)": a run that is
 * alive and renewing its lease must never be adopted or reported as stuck,
 * and when a crashed run's lease runs out, many simultaneous retries must
 * produce exactly one takeover.
 */
import { describe, expect, it } from "vitest";
import type { Engine, RunResult } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { deferred, raceThroughBarrier, rejectionOf, sleep } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor, waitPastCurrentLease } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const LEASE_MS = 1000;

describe("recovery: a live run is never taken over (BR-12)", () => {
  it("a run whose step outlives its lease, with renewal, gets only 409s, is never listed as stuck nor adopted by resumeStale", async () => {
    let slowCalls = 0;
    // The step ends only after its lease has been outlived twice and the
    // other instance has polled 25 times: bounded work, no guess of how long it takes.
    const outlived = deferred();
    const report = workflow("report")
      .phase("start", () => ({ startedBy: "A" }))
      .step("slow_report", async () => {
        slowCalls++;
        await outlived.promise;
        return { pages: 3 };
      })
      .respond(({ state }) => ({ status: 201, body: state }));

    // Engine and run start in the same millisecond.
    // A lease six heartbeats long (the default heartbeat is a third): a slow tick cannot lose it.
    const engineA = createEngine({ db: t.db, leaseMs: 2 * LEASE_MS, heartbeatMs: Math.round(LEASE_MS / 3) });
    const claimed = deferred();
    setFaultHook(engineA, (point) => {
      if (point === "before:phase:start") claimed.resolve();
    });
    let settled = false;
    const a = engineA.runOnce(report, { tenantId: "t1", key: "live1", input: {} }).finally(() => {
      settled = true;
    });
    await claimed.promise;

    const engineB = createEngine({ db: t.connect(3), leaseMs: LEASE_MS });
    const polls: Array<{ kind: "busy"; retryAfterMs: number } | { kind: "result"; value: RunResult<unknown> }> = [];
    const leaseSamples: number[] = [];
    let listedStuck = 0;
    let adopted = 0;
    const releaser = (async () => {
      await waitPastCurrentLease(t.db, "t1", "live1");
      await waitPastCurrentLease(t.db, "t1", "live1");
      await waitFor(async () => (polls.length >= 25 ? true : undefined), 60_000);
      outlived.resolve();
    })();
    while (!settled) {
      const error = await engineB.runOnce(report, { tenantId: "t1", key: "live1", input: {} }).then(
        (value) => {
          polls.push({ kind: "result", value });
          return undefined;
        },
        (e: unknown) => e,
      );
      if (error !== undefined) {
        expect(error).toBeInstanceOf(IdempotencyKeyInProgressError);
        polls.push({ kind: "busy", retryAfterMs: (error as IdempotencyKeyInProgressError).retryAfterMs });
      }
      const stuck = await engineB.listKeys({ stuck: true });
      if (stuck.items.some((r) => r.key === "live1")) listedStuck++;
      // The recovery sweep of another instance must not adopt the live run either.
      const swept = await engineB.resumeStale({ workflows: [report] });
      adopted += swept.resumed.length + swept.failed.length;
      const rec = await engineB.inspect("t1", "live1");
      if (rec?.status === "in_flight") leaseSamples.push(rec.leaseRemainingMs ?? 0);
      await sleep(10);
    }
    const done = await a;
    await releaser;

    expect(done).toMatchObject({ status: 201, replayed: false, body: { startedBy: "A", pages: 3 } });
    expect(slowCalls).toBe(1);
    expect(listedStuck).toBe(0);
    expect(adopted).toBe(0);
    const busy = polls.filter((p) => p.kind === "busy");
    expect(busy.length).toBeGreaterThanOrEqual(25);
    for (const p of busy) expect(p.retryAfterMs).toBeGreaterThan(0);
    // Only a poll that raced the completion may see the result, and only as a replay.
    for (const p of polls) if (p.kind === "result") expect(p.value).toEqual({ ...done, replayed: true });
    expect(Math.min(...leaseSamples)).toBeGreaterThan(0);
    const rec = await engineA.inspect("t1", "live1");
    expect(rec).toMatchObject({ status: "completed", attempt: 1 });
    expect(await engineB.runOnce(report, { tenantId: "t1", key: "live1", input: {} })).toEqual({
      ...done,
      replayed: true,
    });
  });
});

describe("recovery: ten retries at the moment a crashed run's lease expires (BR-12)", () => {
  it("exactly one takes over (attempt 2, one new owner token); the other nine get 409", async () => {
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments);
    const input = { cartId: "c2", amountCents: 700 };

    const crashing = createEngine({ db: t.db, leaseMs: LEASE_MS });
    setFaultHook(crashing, (point, run) => {
      if (point === "after:phase:create_order" && run.attempt === 1) throw new CrashSignal(point);
    });
    expect(await rejectionOf(crashing.runOnce(checkout, { tenantId: "t1", key: "dead2", input }))).toBeInstanceOf(
      CrashSignal,
    );
    const crashed = await crashing.inspect("t1", "dead2");
    expect(crashed).toMatchObject({ status: "in_flight", recoveryPoint: "create_order", attempt: 1 });

    // Ten retriers on two app servers; the takeover pauses before its step
    // until every other retry has settled, so none of them can see a replay.
    // Their own lease is long: the held takeover must not expire, however slow the machine.
    const retriers = [
      createEngine({ db: t.connect(6), leaseMs: 30_000 }),
      createEngine({ db: t.connect(6), leaseMs: 30_000 }),
    ];
    const others = deferred();
    const takeovers: Array<{ attempt: number; token: string | null | undefined }> = [];
    for (const engine of retriers) {
      setFaultHook(engine, async (point, run) => {
        if (point !== "before:step:charge") return;
        takeovers.push({ attempt: run.attempt, token: (await engine.inspect("t1", "dead2"))?.ownerToken });
        await others.promise;
      });
    }

    await sleep(Math.max(0, crashed?.leaseRemainingMs ?? 0) + 2);
    let settledCalls = 0;
    const pending = raceThroughBarrier(10, (i) =>
      (retriers[i % 2] as Engine).runOnce(checkout, { tenantId: "t1", key: "dead2", input }).finally(() => {
        settledCalls++;
      }),
    );
    // Release the takeover once the nine refusals are in.
    const watcher = (async () => {
      await waitFor(async () => (takeovers.length > 0 && settledCalls >= 9 ? true : undefined), 60_000);
      others.resolve();
    })();
    const results = await pending;
    await watcher;

    const ok = results.filter((r) => r.ok);
    const refused = results.filter((r) => !r.ok);
    expect(ok).toHaveLength(1);
    expect(ok[0]).toMatchObject({ value: { status: 201, replayed: false } });
    expect(refused).toHaveLength(9);
    for (const r of refused) expect((r as { error: unknown }).error).toBeInstanceOf(IdempotencyKeyInProgressError);

    expect(takeovers).toHaveLength(1);
    expect(takeovers[0]?.attempt).toBe(2);
    expect(takeovers[0]?.token).toEqual(expect.any(String));
    expect(takeovers[0]?.token).not.toBe(crashed?.ownerToken);
    expect(await crashing.inspect("t1", "dead2")).toMatchObject({ status: "completed", attempt: 2 });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(payments.charges).toBe(1);
  });
});
