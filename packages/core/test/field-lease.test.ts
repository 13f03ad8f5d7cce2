/**
 * Field fault of the kind "lease": a claim whose owner crashed must not
 * block the key forever, and the takeover after the lease must resume after
 * the recovery point (not restart) and call the in-doubt step again with
 * the same derived key, so the provider deduplicates it.
 */
import { describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, RunStateError } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { countOrders, rejectionOf, sleep } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const LEASE_MS = 1000;
const input = { cartId: "c1", amountCents: 500 };

/**
 * An engine whose first attempt on `key` crashes after `payments.charge`
 * returned and before the step was recorded; it notes each attempt's owner
 * token as the attempt reaches the charge step.
 */
function crashingCheckout(key: string) {
  const payments = new FakePayments();
  const { workflow, counters } = makeCheckout(payments);
  const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
  const tokens = new Map<number, string | null | undefined>();
  setFaultHook(engine, async (point, run) => {
    if (run.key !== key) return;
    if (point === "before:step:charge") tokens.set(run.attempt, (await engine.inspect("t1", key))?.ownerToken);
    if (point === "called:step:charge" && run.attempt === 1) throw new CrashSignal(point);
  });
  return { engine, workflow, counters, payments, tokens };
}

async function waitForLeaseExpiry(engine: Engine, key: string): Promise<void> {
  const rec = await engine.inspect("t1", key);
  await sleep(Math.max(0, rec?.leaseRemainingMs ?? 0) + 50);
}

describe("lease: a crash after the charge returned and before it was recorded (BR-07)", () => {
  it("refuses an immediate retry with 409, lists the key as stuck after the lease, and resumes without a second charge", async () => {
    const { engine, workflow, counters, payments, tokens } = crashingCheckout("k1");
    const crash = await rejectionOf(engine.runOnce(workflow, { tenantId: "t1", key: "k1", input }));
    expect(crash).toBeInstanceOf(CrashSignal);
    expect(payments.calls).toHaveLength(1);
    const chargeOfAttempt1 = payments.lookup(payments.calls[0]?.key ?? "");
    expect(chargeOfAttempt1).toBeDefined();

    // At once: the owner might still be alive, so 409 with a bounded wait.
    const busy = await rejectionOf(engine.runOnce(workflow, { tenantId: "t1", key: "k1", input }));
    expect(busy).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect(busy).toMatchObject({ code: "key_in_progress", httpStatus: 409 });
    const retryAfter = (busy as IdempotencyKeyInProgressError).retryAfterMs;
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(LEASE_MS);
    expect((await engine.listKeys({ stuck: true })).items.map((r) => r.key)).not.toContain("k1");

    await waitForLeaseExpiry(engine, "k1");
    const stuck = (await engine.listKeys({ stuck: true })).items.filter((r) => r.key === "k1");
    expect(stuck).toHaveLength(1);
    expect(stuck[0]).toMatchObject({ tenantId: "t1", status: "in_flight", recoveryPoint: "create_order", attempt: 1 });
    expect(stuck[0]?.leaseRemainingMs).toBeLessThanOrEqual(0);

    const resumed = await engine.runOnce(workflow, { tenantId: "t1", key: "k1", input });
    expect(resumed).toMatchObject({ status: 201, replayed: false });
    expect(resumed.body).toEqual({ orderId: expect.any(String), chargeId: chargeOfAttempt1 });

    // Resumed after create_order: one order; the charge called again with the same key and params.
    expect(await countOrders(t.db)).toBe(1);
    expect(counters).toEqual({ create_order: 1, charge: 2, record_charge: 1 });
    expect(payments.calls).toHaveLength(2);
    expect(payments.calls[1]).toEqual(payments.calls[0]);
    expect(payments.charges).toBe(1);

    // The takeover was attempt 2 with a fresh owner token.
    expect(tokens.get(1)).toEqual(expect.any(String));
    expect(tokens.get(2)).toEqual(expect.any(String));
    expect(tokens.get(2)).not.toBe(tokens.get(1));
    const rec = await engine.inspect("t1", "k1");
    expect(rec).toMatchObject({ status: "completed", attempt: 2, recoveryPoint: "record_charge" });
    const charges = rec?.history?.filter((h) => h.name === "charge") ?? [];
    // Attempt 1's call was never recorded (in doubt); attempt 2 recorded it.
    expect(charges.map((h) => h.attempt)).toEqual([1, 2]);
    expect(["started", "interrupted"]).toContain(charges[0]?.outcome);
    expect(charges[1]?.outcome).toBe("succeeded");
    expect(new Set(charges.map((h) => h.derivedKey)).size).toBe(1);
    expect(rec?.history?.filter((h) => h.name === "create_order")).toHaveLength(1);

    const replay = await engine.runOnce(workflow, { tenantId: "t1", key: "k1", input });
    expect(replay).toEqual({ ...resumed, replayed: true });
    expect(payments.calls).toHaveLength(2);
  });

  it("takes over at once after engine.release, straight after the crash", async () => {
    const { engine, workflow, counters, payments, tokens } = crashingCheckout("k2");
    expect(await rejectionOf(engine.runOnce(workflow, { tenantId: "t1", key: "k2", input }))).toBeInstanceOf(
      CrashSignal,
    );
    const chargeOfAttempt1 = payments.lookup(payments.calls[0]?.key ?? "");

    expect(await engine.release("t1", "k2")).toMatchObject({ status: "in_flight", ownerToken: null });
    expect((await engine.listKeys({ stuck: true })).items.map((r) => r.key)).toContain("k2");
    const started = performance.now();
    const resumed = await engine.runOnce(workflow, { tenantId: "t1", key: "k2", input });
    expect(performance.now() - started).toBeLessThan(LEASE_MS / 2);

    expect(resumed).toMatchObject({ status: 201, replayed: false, body: { chargeId: chargeOfAttempt1 } });
    expect(counters).toEqual({ create_order: 1, charge: 2, record_charge: 1 });
    expect(payments.charges).toBe(1);
    expect(payments.calls[1]).toEqual(payments.calls[0]);
    expect(tokens.get(2)).not.toBe(tokens.get(1));
    expect((await engine.inspect("t1", "k2"))?.attempt).toBe(2);
    // release on a completed record changes nothing.
    await expect(engine.release("t1", "k2")).rejects.toBeInstanceOf(RunStateError);
    expect(await engine.runOnce(workflow, { tenantId: "t1", key: "k2", input })).toEqual({
      ...resumed,
      replayed: true,
    });
  });
});
