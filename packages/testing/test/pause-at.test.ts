/**
 * pauseAt holds a real run at a boundary while the test acts on the key;
 * testEngine gives runs a short lease on the database clock.
 */
import { createEngine, IdempotencyKeyInProgressError, LeaseLostError } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { pauseAt, testEngine } from "../src/index.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/database.ts";
import { FakeProvider } from "./support/provider.ts";

const t = useTestDatabase();
const input = { cartId: "cart-p", amountCents: 990 };

describe("pauseAt", () => {
  it("holds the run between the call and its record: a duplicate gets 409, then the run finishes once", async () => {
    const provider = new FakeProvider();
    const checkout = makeCheckout(provider);
    const engine = createEngine({ db: t.db });
    const req = { tenantId: "p", key: "pause-1", input };

    const pause = pauseAt(engine, "called:step:charge");
    const first = engine.runOnce(checkout, req);
    await pause.reached;
    expect(provider.charges).toBe(1);
    expect(await engine.inspect("p", "pause-1")).toMatchObject({ status: "in_flight", recoveryPoint: "create_order" });
    await expect(engine.runOnce(checkout, req)).rejects.toBeInstanceOf(IdempotencyKeyInProgressError);

    pause.release();
    expect(await first).toMatchObject({ status: 201, replayed: false });
    expect(await engine.runOnce(checkout, req)).toMatchObject({ status: 201, replayed: true });
    expect(provider.calls).toHaveLength(1);
  });

  it("matches only the given key and attempt, and lets later arrivals pass", async () => {
    const provider = new FakeProvider();
    const checkout = makeCheckout(provider);
    const engine = createEngine({ db: t.db });
    const pause = pauseAt(engine, "before:phase:record_charge", { key: "pause-b", attempt: 1 });

    // Another key passes the same boundary untouched.
    expect((await engine.runOnce(checkout, { tenantId: "p", key: "pause-a", input })).status).toBe(201);
    const held = engine.runOnce(checkout, { tenantId: "p", key: "pause-b", input });
    await pause.reached;
    expect(await engine.inspect("p", "pause-b")).toMatchObject({ status: "in_flight", recoveryPoint: "charge" });
    pause.release();
    expect((await held).status).toBe(201);
    expect((await engine.runOnce(checkout, { tenantId: "p", key: "pause-c", input })).status).toBe(201);
  });

  it("lets two pauses share one engine", async () => {
    const provider = new FakeProvider();
    const checkout = makeCheckout(provider);
    const engine = createEngine({ db: t.db });
    const atCharge = pauseAt(engine, "before:step:charge", { key: "two-1" });
    const atRecord = pauseAt(engine, "before:phase:record_charge", { key: "two-2" });
    const one = engine.runOnce(checkout, { tenantId: "p", key: "two-1", input });
    const two = engine.runOnce(checkout, { tenantId: "p", key: "two-2", input });
    await Promise.all([atCharge.reached, atRecord.reached]);
    expect((await engine.inspect("p", "two-1"))?.recoveryPoint).toBe("create_order");
    expect((await engine.inspect("p", "two-2"))?.recoveryPoint).toBe("charge");
    atRecord.release();
    atCharge.release();
    expect((await Promise.all([one, two])).map((r) => r.status)).toEqual([201, 201]);
  });

  it("lets a takeover finish while the paused attempt is held; the held one then loses its lease", async () => {
    const provider = new FakeProvider();
    const checkout = makeCheckout(provider);
    const engine = createEngine({ db: t.db, leaseMs: 30_000 });
    const req = { tenantId: "p", key: "pause-take", input };
    const pause = pauseAt(engine, "called:step:charge", { attempt: 1 });
    const zombie = engine.runOnce(checkout, req).catch((e: unknown) => e);
    await pause.reached;
    expect(await engine.release("p", "pause-take")).toMatchObject({ status: "in_flight", ownerToken: null });
    expect(await engine.runOnce(checkout, req)).toMatchObject({ status: 201, replayed: false });
    pause.release();
    // Its next write (recording the charge) is fenced on the owner token the takeover replaced.
    expect(await zombie).toBeInstanceOf(LeaseLostError);
    expect(provider.charges).toBe(1);
    expect(provider.calls).toHaveLength(2);
  });

  it("rejects a point that is not a boundary", () => {
    const engine = createEngine({ db: t.db });
    expect(() => pauseAt(engine, "before:charge")).toThrow(/not a boundary: "before:charge"/);
    expect(() => pauseAt(engine, "during:step:charge")).toThrow(TypeError);
  });
});

describe("testEngine", () => {
  it("uses a one-second lease unless told otherwise, measured on the database clock", async () => {
    const checkout = makeCheckout(new FakeProvider());
    for (const [engine, leaseMs, key] of [
      [testEngine(t.db), 1_000, "lease-default"],
      [testEngine(t.db, { leaseMs: 5_000 }), 5_000, "lease-5000"],
    ] as const) {
      const pause = pauseAt(engine, "before:step:charge");
      const run = engine.runOnce(checkout, { tenantId: "p", key, input });
      await pause.reached;
      const lease = (await engine.inspect("p", key))?.leaseRemainingMs ?? -1;
      expect(lease).toBeGreaterThan(0);
      expect(lease).toBeLessThanOrEqual(leaseMs);
      pause.release();
      expect((await run).status).toBe(201);
    }
  });
});

describe("fencing, seen through pauseAt", () => {
  // Known failure: the zombie's outbox insert collides with the delivery key the
  // takeover already committed (the key is derived from run id, phase and position,
  // all equal for both attempts), and phase-outbox.ts turns that unique violation
  // into WorkflowUsageError ("delivery key is already taken") before the fenced
  // commit can report the lost lease.
  it("a zombie phase that enqueues an outbox message after a takeover fails with LeaseLostError", async () => {
    const provider = new FakeProvider();
    const checkout = makeCheckout(provider);
    const engine = createEngine({ db: t.db, leaseMs: 30_000 });
    const req = { tenantId: "p", key: "zombie-outbox", input };
    const pause = pauseAt(engine, "before:phase:record_charge", { attempt: 1 });
    const zombie = engine.runOnce(checkout, req).catch((e: unknown) => e);
    await pause.reached;
    expect(await engine.release("p", "zombie-outbox")).toMatchObject({ status: "in_flight", ownerToken: null });
    expect(await engine.runOnce(checkout, req)).toMatchObject({ status: 201, replayed: false });
    pause.release();
    const error = await zombie;
    expect(error, String(error)).toBeInstanceOf(LeaseLostError);
  });
});
