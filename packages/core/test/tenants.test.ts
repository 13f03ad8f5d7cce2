/**
 * Tenant isolation: the same idempotency key in two tenants names two
 * intents. Both execute, neither sees the other's response or lease, and the
 * derived keys they send downstream never collide at a shared provider.
 */
import { describe, expect, it } from "vitest";
import { createEngine, deriveStepKey, IdempotencyKeyInProgressError, RunStateError } from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { countOrders, recordSnapshot } from "./support/effects.ts";
import { barrier, crashAt, settle } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();

function setup() {
  const payments = new FakePayments();
  const { workflow: checkout, counters } = makeCheckout(payments);
  const engine = createEngine({ db: t.db, leaseMs: 30_000 });
  return { payments, checkout, counters, engine };
}

describe("same key in two tenants", () => {
  it("both execute, each replays only its own response", async () => {
    const s = setup();
    const acme = await s.engine.runOnce(s.checkout, {
      tenantId: "acme",
      key: "order-1",
      input: { cartId: "c-acme", amountCents: 100 },
    });
    const globex = await s.engine.runOnce(s.checkout, {
      tenantId: "globex",
      key: "order-1",
      input: { cartId: "c-globex", amountCents: 999 },
    });
    // A different payload under the same key is no mismatch across tenants: both ran.
    expect([acme.replayed, globex.replayed]).toEqual([false, false]);
    expect(acme.body).not.toEqual(globex.body);
    expect(await countOrders(t.db, { tenantId: "acme", cartId: "c-acme" })).toBe(1);
    expect(await countOrders(t.db, { tenantId: "globex", cartId: "c-globex" })).toBe(1);
    expect(s.counters).toEqual({ create_order: 2, charge: 2, record_charge: 2 });
    expect(s.payments.charges).toBe(2);

    const acmeAgain = await s.engine.runOnce(s.checkout, {
      tenantId: "acme",
      key: "order-1",
      input: { cartId: "c-acme", amountCents: 100 },
    });
    const globexAgain = await s.engine.runOnce(s.checkout, {
      tenantId: "globex",
      key: "order-1",
      input: { cartId: "c-globex", amountCents: 999 },
    });
    expect(acmeAgain).toEqual({ ...acme, replayed: true });
    expect(globexAgain).toEqual({ ...globex, replayed: true });
    // Cross-tenant payloads are mismatches inside the other tenant, never replays of it.
    await expect(
      s.engine.runOnce(s.checkout, {
        tenantId: "acme",
        key: "order-1",
        input: { cartId: "c-globex", amountCents: 999 },
      }),
    ).rejects.toMatchObject({ code: "key_mismatch" });
    expect((await s.engine.inspect("acme", "order-1"))?.response?.body).toEqual(acme.body);
    expect((await s.engine.inspect("globex", "order-1"))?.response?.body).toEqual(globex.body);
  });

  it("identical payloads in two tenants still execute twice, with distinct derived keys and charges", async () => {
    const s = setup();
    const input = { cartId: "c-same", amountCents: 250 };
    const a = await s.engine.runOnce(s.checkout, { tenantId: "t-one", key: "dup", input });
    const b = await s.engine.runOnce(s.checkout, { tenantId: "t-two", key: "dup", input });
    expect([a.replayed, b.replayed]).toEqual([false, false]);
    expect(await countOrders(t.db, { cartId: "c-same" })).toBe(2);
    const keyOne = deriveStepKey("t-one", "dup", "checkout", "charge");
    const keyTwo = deriveStepKey("t-two", "dup", "checkout", "charge");
    expect(keyOne).not.toBe(keyTwo);
    expect(s.payments.calls.map((c) => c.key)).toEqual([keyOne, keyTwo]);
    expect(s.payments.charges).toBe(2);
    expect((a.body as { chargeId: string }).chargeId).not.toBe((b.body as { chargeId: string }).chargeId);
    const history = await Promise.all(
      ["t-one", "t-two"].map(
        async (tenant) => (await s.engine.inspect(tenant, "dup"))?.history?.find((h) => h.kind === "step")?.derivedKey,
      ),
    );
    expect(history).toEqual([keyOne, keyTwo]);
  });

  it("concurrent first requests for one key in many tenants: one execution per tenant, no 409 across tenants", async () => {
    const s = setup();
    const tenants = Array.from({ length: 8 }, (_, i) => `tenant-${i}`);
    const start = barrier(tenants.length);
    const { values, errors } = await settle(
      tenants.map(async (tenantId) => {
        await start.wait();
        return s.engine.runOnce(s.checkout, {
          tenantId,
          key: "black-friday",
          input: { cartId: `c-bf-${tenantId}`, amountCents: 100 },
        });
      }),
    );
    expect(errors.map(String)).toEqual([]);
    expect(values.every((v) => v.status === 201 && !v.replayed)).toBe(true);
    expect(new Set(s.payments.calls.map((c) => c.key)).size).toBe(tenants.length);
    expect(s.payments.charges).toBe(tenants.length);
  });

  it("a run in flight in one tenant neither blocks nor is released by the other tenant", async () => {
    const s = setup();
    const input = { cartId: "c-iso", amountCents: 100 };
    crashAt(s.engine, "after:phase:create_order", { key: "iso" });
    await expect(s.engine.runOnce(s.checkout, { tenantId: "alpha", key: "iso", input })).rejects.toBeInstanceOf(
      CrashSignal,
    );
    const alpha = await recordSnapshot(s.engine, "alpha", "iso");
    // The crash hook fired once; beta's run on the same key goes straight through.
    expect((await s.engine.runOnce(s.checkout, { tenantId: "beta", key: "iso", input })).status).toBe(201);
    await expect(s.engine.release("beta", "iso")).rejects.toBeInstanceOf(RunStateError);
    expect(await recordSnapshot(s.engine, "alpha", "iso")).toEqual(alpha);
    await expect(s.engine.runOnce(s.checkout, { tenantId: "alpha", key: "iso", input })).rejects.toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
    const page = await s.engine.listKeys({ tenantId: "alpha" });
    expect(page.items.map((r) => [r.tenantId, r.key, r.status])).toEqual([["alpha", "iso", "in_flight"]]);
  });

  it("tenant ids and keys are case-sensitive and never trimmed", async () => {
    const s = setup();
    const input = { cartId: "c-case", amountCents: 100 };
    for (const [tenantId, key] of [
      ["Acme", "K"],
      ["acme", "K"],
      ["acme", "k"],
      ["acme", "k "],
      [" acme", "k"],
    ] as const) {
      const res = await s.engine.runOnce(s.checkout, { tenantId, key, input });
      expect(res.replayed, JSON.stringify([tenantId, key])).toBe(false);
    }
    expect(await countOrders(t.db, { cartId: "c-case" })).toBe(5);
    expect(new Set(s.payments.calls.map((c) => c.key)).size).toBe(5);
  });
});

describe("deriveStepKey", () => {
  it("is a pure function of (tenant, key, workflow, step), distinct when any part differs, unambiguous, short", () => {
    const base = deriveStepKey("acme", "k-1", "checkout", "charge");
    expect(deriveStepKey("acme", "k-1", "checkout", "charge")).toBe(base);
    const variants = [
      deriveStepKey("globex", "k-1", "checkout", "charge"),
      deriveStepKey("acme", "k-2", "checkout", "charge"),
      deriveStepKey("acme", "k-1", "refund", "charge"),
      deriveStepKey("acme", "k-1", "checkout", "capture"),
      // Concatenation must not collide: ("a|b","c") vs ("a","b|c").
      deriveStepKey("acme|k", "-1", "checkout", "charge"),
      deriveStepKey("acme", "k-1checkout", "", "charge"),
    ];
    expect(new Set([base, ...variants]).size).toBe(variants.length + 1);
    const long = deriveStepKey("t".repeat(255), "k".repeat(255), "w".repeat(100), "s".repeat(100));
    expect(long.length).toBeLessThanOrEqual(255);
    expect(long).not.toContain("ttt");
    expect(base).not.toContain("acme");
  });

  it("two engines (two processes) send the same derived key for one run", async () => {
    const payments = new FakePayments();
    const { workflow: checkout } = makeCheckout(payments);
    const first = createEngine({ db: t.db, leaseMs: 30_000 });
    const second = createEngine({ db: t.connect(2), leaseMs: 30_000 });
    const input = { cartId: "c-two-proc", amountCents: 100 };
    crashAt(first, "called:step:charge");
    await expect(first.runOnce(checkout, { tenantId: "acme", key: "two-proc", input })).rejects.toBeInstanceOf(
      CrashSignal,
    );
    await second.release("acme", "two-proc");
    expect((await second.runOnce(checkout, { tenantId: "acme", key: "two-proc", input })).status).toBe(201);
    expect(payments.calls.map((c) => c.key)).toEqual([
      deriveStepKey("acme", "two-proc", "checkout", "charge"),
      deriveStepKey("acme", "two-proc", "checkout", "charge"),
    ]);
    expect(payments.charges).toBe(1);
  });
});
