/**
 * Field fault of the kind "scoping (tenant)": the tenant is part of every
 * lookup. The same key in two tenants is two intents; neither tenant can
 * replay, mismatch or block the other's; a missing tenant is an error, never
 * a shared default bucket.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, IdempotencyKeyMismatchError, InvalidIdempotencyKeyError } from "../src/index.ts";
import { setFaultHook } from "../src/internal.ts";
import { countIdempoRows, countOrders, deferred, rejectionOf, useLoggedDb } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const logged = useLoggedDb(t);
const payments = new FakePayments();
const { workflow: checkout, counters } = makeCheckout(payments);
let engine: Engine;

beforeAll(() => {
  engine = createEngine({ db: logged.db, leaseMs: 1000 });
});

const c1 = { cartId: "c1", amountCents: 500 };
const c2 = { cartId: "c2", amountCents: 500 };
const call = (tenantId: string, key: string, input: typeof c1) => engine.runOnce(checkout, { tenantId, key, input });

describe("scoping (tenant): one key, two tenants (BR-16)", () => {
  it("the same key executes separately in t1 and t2, each replays its own, and the payment keys differ", async () => {
    const r1 = await call("t1", "k", c1);
    const r2 = await call("t2", "k", c1);
    expect(r1).toMatchObject({ status: 201, replayed: false });
    expect(r2).toMatchObject({ status: 201, replayed: false });
    const b1 = r1.body as { orderId: string; chargeId: string };
    const b2 = r2.body as { orderId: string; chargeId: string };
    expect(b2.orderId).not.toBe(b1.orderId);
    expect(b2.chargeId).not.toBe(b1.chargeId);
    expect(await countOrders(t.db, "t1")).toBe(1);
    expect(await countOrders(t.db, "t2")).toBe(1);

    // Derived keys: distinct per tenant, so the shared provider account makes two charges.
    expect(payments.calls).toHaveLength(2);
    expect(payments.calls[0]?.key).not.toBe(payments.calls[1]?.key);
    expect(payments.charges).toBe(2);
    const k1 = (await engine.inspect("t1", "k"))?.history?.find((h) => h.name === "charge")?.derivedKey;
    const k2 = (await engine.inspect("t2", "k"))?.history?.find((h) => h.name === "charge")?.derivedKey;
    expect([k1, k2]).toEqual([payments.calls[0]?.key, payments.calls[1]?.key]);

    // The tenant is the scope: t1 replays o1, t2 replays o2.
    expect(await call("t1", "k", c1)).toEqual({ ...r1, replayed: true });
    expect(await call("t2", "k", c1)).toEqual({ ...r2, replayed: true });
  });

  it("judges a mismatch against the tenant's own record only", async () => {
    await call("t1", "m", c1);
    // t2's first use of m with another payload is not a mismatch with t1's record.
    const own = await call("t2", "m", c2);
    expect(own).toMatchObject({ status: 201, replayed: false });
    const t1Before = await engine.inspect("t1", "m");
    const t2Before = await engine.inspect("t2", "m");
    // Against t2's own record, c1 is now the mismatch.
    expect(await rejectionOf(call("t2", "m", c1))).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(await engine.inspect("t1", "m")).toEqual(t1Before);
    expect(await engine.inspect("t2", "m")).toEqual(t2Before);
  });

  it("a key in flight for t1 does not block the same key for t2", async () => {
    const reached = deferred();
    const proceed = deferred();
    setFaultHook(engine, async (point, run) => {
      if (run.tenantId === "t1" && run.key === "k2" && point === "before:phase:create_order") {
        reached.resolve();
        await proceed.promise;
      }
    });
    const t1Run = call("t1", "k2", c1);
    await reached.promise;
    expect((await engine.inspect("t1", "k2"))?.status).toBe("in_flight");
    const t2Run = await call("t2", "k2", c1);
    expect(t2Run).toMatchObject({ status: 201, replayed: false });
    proceed.resolve();
    const t1Done = await t1Run;
    expect(t1Done).toMatchObject({ status: 201, replayed: false });
    expect((t1Done.body as { orderId: string }).orderId).not.toBe((t2Run.body as { orderId: string }).orderId);
    setFaultHook(engine, undefined);
  });

  it.each([
    ["undefined", undefined],
    ["null", null],
    ["empty", ""],
    ["whitespace", "   "],
    ["256 characters", "t".repeat(256)],
  ])("a %s tenant is invalid_key: no row, no phase, no SQL, no default bucket", async (_what, tenantId) => {
    const rows = await countIdempoRows(t.db);
    const ran = counters.create_order;
    const sent = logged.queries.length;
    const error = await rejectionOf(call(tenantId as string, "k", c1));
    expect(error).toBeInstanceOf(InvalidIdempotencyKeyError);
    expect(error).toMatchObject({ code: "invalid_key", httpStatus: 400 });
    expect(error.message).toMatch(/tenant id/);
    expect(logged.queries.length).toBe(sent);
    expect(await countIdempoRows(t.db)).toBe(rows);
    expect(counters.create_order).toBe(ran);
  });

  it("listKeys({tenantId: 't1'}) shows only t1's records", async () => {
    const t1Keys = await engine.listKeys({ tenantId: "t1", limit: 1000 });
    expect(t1Keys.items.length).toBeGreaterThanOrEqual(3);
    expect(new Set(t1Keys.items.map((r) => r.tenantId))).toEqual(new Set(["t1"]));
    expect(t1Keys.items.map((r) => r.key).sort()).toEqual(["k", "k2", "m"]);
    const all = await engine.listKeys({ limit: 1000 });
    expect(new Set(all.items.map((r) => r.tenantId))).toEqual(new Set(["t1", "t2"]));
    // create_order ran once per (tenant, key) intent: t1/k, t2/k, t1/m, t2/m, t1/k2, t2/k2.
    expect(counters.create_order).toBe(6);
  });
});
