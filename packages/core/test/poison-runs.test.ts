/**
 * Field fault of the kind "recovery (crash loops, isolating a poison run,
 * counting attempts)" (BR-26): a run that can never finish must not be
 * retried forever, must never stop a recovery pass or a worker from
 * finishing the other runs, and every takeover counts as an attempt at
 * claim time, crash or not.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  RunNotFoundError,
  RunParkedError,
  RunStateError,
  UnstorableValueError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { rejectionOf } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase({ pool: 6 });
const LEASE_MS = 300;

/** A step that fails every time it is called while `poisoned` holds. */
function flakyReport(name: string, poisoned: () => boolean, maxAttempts?: number) {
  let calls = 0;
  const wf = workflow(name, maxAttempts === undefined ? {} : { maxAttempts })
    .phase("start", () => ({ started: true }))
    .step("render", () => {
      calls++;
      if (poisoned()) throw new Error("boom");
      return { pages: 2 };
    })
    .respond(({ state }) => ({ status: 200, body: state }));
  return { wf, calls: () => calls };
}

async function statusOf(engine: Engine, tenantId: string, key: string) {
  return (await engine.inspect(tenantId, key))?.status;
}

describe("poison runs: attempts are bounded (maxAttempts)", () => {
  it("a step that always throws runs maxAttempts times, then the run is parked and every later call gets RunParkedError", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const { wf, calls } = flakyReport("always_throws", () => true, 3);
    const errors: Error[] = [];
    for (let i = 0; i < 6; i++) {
      errors.push(await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "p-throw", input: {} })));
      if ((await statusOf(engine, "t1", "p-throw")) === "in_flight") await engine.release("t1", "p-throw");
    }
    expect(errors.slice(0, 3).map((e) => e.message)).toEqual(["boom", "boom", "boom"]);
    // The takeover that would start attempt 4 parks the run instead.
    for (const e of errors.slice(3)) {
      expect(e).toBeInstanceOf(RunParkedError);
      expect(e.message).toMatch(/maxAttempts \(3\)/);
    }
    expect(calls()).toBe(3);
    const rec = await engine.inspect("t1", "p-throw");
    expect(rec).toMatchObject({ status: "parked", attempt: 3, ownerToken: null, leaseRemainingMs: null });
    expect(rec?.parkedReason).toMatch(/maxAttempts \(3\) reached/);
    // Never taken over by a resumer, never listed as stuck, listed as parked.
    expect(await engine.resumeStale({ workflows: [wf] })).toEqual({ resumed: [], failed: [], parked: [] });
    expect((await engine.listKeys({ stuck: true })).items.map((r) => r.key)).not.toContain("p-throw");
    expect((await engine.listKeys({ status: "parked" })).items.map((r) => r.key)).toContain("p-throw");
    expect(calls()).toBe(3);
  });

  it("the default budget is 20 attempts", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const { wf, calls } = flakyReport("default_budget", () => true);
    let parked: Error | undefined;
    for (let i = 0; i < 25 && !parked; i++) {
      const e = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "p-default", input: {} }));
      if (e instanceof RunParkedError) parked = e;
      else await engine.release("t1", "p-default");
    }
    expect(parked).toBeInstanceOf(RunParkedError);
    expect(calls()).toBe(20);
    expect(await engine.inspect("t1", "p-default")).toMatchObject({ status: "parked", attempt: 20 });
  });

  it("every takeover counts at claim time, also one that crashes its process; one distinct charge however often", async () => {
    const payments = new FakePayments();
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const { workflow: checkout } = makeCheckout(payments, { name: "crashy_checkout", options: { maxAttempts: 2 } });
    let poisoned = true;
    setFaultHook(engine, (point) => {
      if (poisoned && point === "called:step:charge") throw new CrashSignal(point);
    });
    const input = { cartId: "c-crash", amountCents: 500 };
    const first = await rejectionOf(engine.runOnce(checkout, { tenantId: "t1", key: "p-crash", input }));
    expect(first).toBeInstanceOf(CrashSignal);
    await engine.release("t1", "p-crash");
    expect(await rejectionOf(engine.runOnce(checkout, { tenantId: "t1", key: "p-crash", input }))).toBeInstanceOf(
      CrashSignal,
    );
    await engine.release("t1", "p-crash");
    expect(await rejectionOf(engine.runOnce(checkout, { tenantId: "t1", key: "p-crash", input }))).toBeInstanceOf(
      RunParkedError,
    );
    expect(await engine.inspect("t1", "p-crash")).toMatchObject({ status: "parked", attempt: 2 });
    // Fixed: unpark gives a fresh budget and the run completes with the one charge it already made.
    poisoned = false;
    const unparked = await engine.unpark("t1", "p-crash");
    expect(unparked).toMatchObject({ status: "in_flight", parkedReason: null, attemptsSinceUnpark: 0 });
    const done = await engine.runOnce(checkout, { tenantId: "t1", key: "p-crash", input });
    expect(done).toMatchObject({ status: 201, replayed: false });
    expect(payments.charges).toBe(1);
    expect(new Set(payments.calls.map((c) => `${c.key} ${c.params}`)).size).toBe(1);
    expect(await engine.inspect("t1", "p-crash")).toMatchObject({ status: "completed", attempt: 3 });
    setFaultHook(engine, undefined);
  });

  it("a different payload for a parked key is still a 422 mismatch, not RunParkedError", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const bad = workflow("bigint_phase")
      .phase("compute", () => ({ total: 10n }))
      .respond(({ state }) => ({ status: 200, body: state }));
    await rejectionOf(engine.runOnce(bad, { tenantId: "t1", key: "p-order", input: { a: 1 } }));
    const other = await rejectionOf(engine.runOnce(bad, { tenantId: "t1", key: "p-order", input: { a: 2 } }));
    expect((other as { code?: string }).code).toBe("key_mismatch");
  });
});

describe("poison runs: a value that cannot be stored parks the run at once", () => {
  it("a BigInt in a phase result: the first call gets UnstorableValueError, the run is parked with that reason", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    let runs = 0;
    const wf = workflow("bigint_result")
      .phase("compute", () => {
        runs++;
        return { total: 10n };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const first = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "p-big", input: {} }));
    expect(first).toBeInstanceOf(UnstorableValueError);
    const rec = await engine.inspect("t1", "p-big");
    expect(rec).toMatchObject({ status: "parked", recoveryPoint: null, ownerToken: null });
    expect(rec?.parkedReason).toMatch(/phase 'compute'.*\$\.total/);
    expect(rec?.history?.at(-1)).toMatchObject({ kind: "phase", name: "compute", outcome: "failed" });
    // No retry and no resumer repeats it.
    const again = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "p-big", input: {} }));
    expect(again).toBeInstanceOf(RunParkedError);
    expect((again as RunParkedError).reason).toMatch(/phase 'compute'/);
    expect(await engine.resumeStale({ workflows: [wf] })).toEqual({ resumed: [], failed: [], parked: [] });
    expect(runs).toBe(1);
  });

  it("a BigInt in a respond body after a step: the step's result is kept, the run is parked, unpark after the fix resumes without calling the step again", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    let calls = 0;
    let fixed = false;
    const make = () =>
      workflow("bigint_respond")
        .step("charge", () => {
          calls++;
          return { chargeId: "ch_1" };
        })
        .respond(({ state }) => ({ status: 201, body: { ...state, cents: fixed ? 10 : 10n } }));
    const wf = make();
    expect(await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "p-respond", input: {} }))).toBeInstanceOf(
      UnstorableValueError,
    );
    expect(await engine.inspect("t1", "p-respond")).toMatchObject({ status: "parked", recoveryPoint: "charge" });
    fixed = true;
    await engine.unpark("t1", "p-respond");
    // A step was last: nothing is left to run, so the takeover only completes with respond.
    const done = await engine.runOnce(wf, { tenantId: "t1", key: "p-respond", input: {} });
    expect(done).toMatchObject({ status: 201, body: { chargeId: "ch_1", cents: 10 } });
    expect(calls).toBe(1);
  });
});

describe("poison runs never stop the others (BR-26)", () => {
  it("resumeStale: a throwing run is reported under failed, a run out of attempts under parked, the rest are resumed", async () => {
    const payments = new FakePayments();
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const { workflow: checkout } = makeCheckout(payments, { name: "batch_checkout", options: { maxAttempts: 2 } });
    let throwFor = "";
    setFaultHook(engine, (point, run) => {
      if (point === "after:phase:create_order" && run.attempt === 1) throw new CrashSignal(point);
      if (point === "before:step:charge" && run.key === throwFor) throw new Error("boom");
    });
    // Oldest lease first: the poison runs sit at the front of the batch.
    for (const key of ["p1", "p2", "g1", "g2", "g3"]) {
      await rejectionOf(
        engine.runOnce(checkout, { tenantId: "t1", key, input: { cartId: `c-${key}`, amountCents: 100 } }),
      );
    }
    // p2 already used its two attempts: its next takeover parks it.
    await sql`UPDATE idempo.runs SET attempt = 2 WHERE tenant_id = 't1' AND key = 'p2'`.execute(t.db);
    for (const key of ["p1", "p2", "g1", "g2", "g3"]) await engine.release("t1", key);
    throwFor = "p1";
    const report = await engine.resumeStale({ workflows: [checkout] });
    expect(report.failed.map((f) => [f.key, f.error.message])).toEqual([["p1", "boom"]]);
    expect(report.parked.map((p) => p.key)).toEqual(["p2"]);
    expect(report.resumed.map((r) => [r.key, r.status]).sort()).toEqual([
      ["g1", 201],
      ["g2", 201],
      ["g3", 201],
    ]);
    setFaultHook(engine, undefined);
  });

  it("a worker keeps finishing good runs while a poison run parks", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const { wf, calls } = flakyReport("worker_poison", () => true, 2);
    const good = workflow("worker_good")
      .phase("one", () => ({ one: 1 }))
      .phase("two", () => ({ two: 2 }))
      .respond(({ state }) => ({ status: 200, body: state }));
    setFaultHook(engine, (point, run) => {
      if (point === "after:phase:one" && run.attempt === 1) throw new CrashSignal(point);
    });
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "w-poison", input: {} }));
    for (const key of ["w-g1", "w-g2"]) await rejectionOf(engine.runOnce(good, { tenantId: "t1", key, input: {} }));
    for (const key of ["w-poison", "w-g1", "w-g2"]) await engine.release("t1", key);
    const errors: unknown[] = [];
    const worker = engine.startWorker({
      workflows: [wf, good],
      intervalMs: 50,
      sweep: false,
      onError: (e) => errors.push(e),
    });
    try {
      await waitFor(
        async () => {
          const states = await Promise.all(["w-poison", "w-g1", "w-g2"].map((k) => statusOf(engine, "t1", k)));
          return states.join() === "parked,completed,completed" ? true : undefined;
        },
        15_000,
        50,
      );
    } finally {
      await worker.stop();
      setFaultHook(engine, undefined);
    }
    expect(calls()).toBe(2);
    expect(errors.every((e) => (e as Error).message === "boom")).toBe(true);
  });
});

describe("unpark", () => {
  it("refuses a run that is not parked (RunStateError) and an absent key (RunNotFoundError)", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const wf = workflow("plain")
      .phase("one", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(wf, { tenantId: "t1", key: "u-done", input: {} });
    const refused = await rejectionOf(engine.unpark("t1", "u-done"));
    expect(refused).toBeInstanceOf(RunStateError);
    expect(refused.message).toMatch(/is completed, not parked/);
    expect(await rejectionOf(engine.unpark("t1", "u-absent"))).toBeInstanceOf(RunNotFoundError);
  });
});
