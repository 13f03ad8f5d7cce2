/**
 * The crash helpers know `.parallel` items: every branch has its three
 * boundaries and its own derived key; a checkout that charges and reserves
 * stock at once passes at each of them, a branch that mints its own key is
 * flagged where it is called again, and `pauseAt` holds one branch while
 * the others run.
 */
import { randomUUID } from "node:crypto";
import { createEngine, deriveStepKey, workflow } from "@idempo/core";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { boundariesOf, crashAtEveryBoundary, pauseAt } from "../src/index.ts";
import type { Shop } from "./support/database.ts";
import { useTestDatabase } from "./support/database.ts";
import { FakeProvider } from "./support/provider.ts";

const t = useTestDatabase();
const input = { cartId: "cart-1", amountCents: 4200 };

function makeOrder(payments: FakeProvider, stock: FakeProvider, reserveKey: "derived" | "fresh" = "derived") {
  return workflow<Shop>("parallel_order")
    .phase("create_order", async ({ tx, tenantId }) => {
      const orderId = `o_${randomUUID()}`;
      await tx
        .insertInto("orders")
        .values({ id: orderId, tenant_id: tenantId, cart_id: "c", amount_cents: 1 })
        .execute();
      return { orderId };
    })
    .parallel("settle", (p) =>
      p
        .step("charge", ({ state, idempotencyKey }) => ({
          chargeId: payments.charge({ orderId: state.orderId, amountCents: 4200 }, idempotencyKey).id,
        }))
        .step("reserve", ({ state, idempotencyKey }) => ({
          reservationId: stock.charge(
            { orderId: state.orderId, amountCents: 1 },
            reserveKey === "derived" ? idempotencyKey : randomUUID(),
          ).id,
        })),
    )
    .phase("mark_paid", async ({ tx, state }) => {
      await tx
        .updateTable("orders")
        .set({ charge_id: state.settle.charge.chargeId })
        .where("id", "=", state.orderId)
        .execute();
      return {};
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, settle: state.settle } }));
}

const countOrders = (tenantId: string) => async () => {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND charge_id IS NOT NULL`.execute(t.db);
  return rows[0]?.n ?? -1;
};

const POINTS = [
  "before:phase:create_order",
  "after:phase:create_order",
  "before:branch:settle/charge",
  "called:branch:settle/charge",
  "after:branch:settle/charge",
  "before:branch:settle/reserve",
  "called:branch:settle/reserve",
  "after:branch:settle/reserve",
  "after:parallel:settle",
  "before:phase:mark_paid",
  "after:phase:mark_paid",
];

describe("crash helpers and parallel items", () => {
  it("boundariesOf lists each branch's three boundaries and the item's commit", () => {
    expect(boundariesOf(makeOrder(new FakeProvider(), new FakeProvider()))).toEqual(POINTS);
  });

  it("crashAtEveryBoundary passes at every boundary of a parallel item: one charge, one reservation per run", async () => {
    const payments = new FakeProvider();
    const stock = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const tenantId = "par-ok";
    const report = await crashAtEveryBoundary(engine, makeOrder(payments, stock), input, {
      effects: { paid: countOrders(tenantId), charges: () => payments.charges, reservations: () => stock.charges },
      requests: () => [...payments.requests, ...stock.requests],
      tenantId,
      keyPrefix: "par-ok-",
    });
    expect(report.ok, report.table).toBe(true);
    expect(report.boundaries.map((b) => [b.point, b.outcome])).toEqual(POINTS.map((p) => [p, "passed"]));
    for (const b of [report.baseline, ...report.boundaries]) {
      expect(b.derivedKeys).toEqual({
        "settle/charge": [deriveStepKey(tenantId, b.key, "parallel_order", "settle", "charge")],
        "settle/reserve": [deriveStepKey(tenantId, b.key, "parallel_order", "settle", "reserve")],
      });
    }
    // Counted apart from the report: one charge and one reservation per run (the baseline and 11 crashes).
    expect([payments.charges, stock.charges]).toEqual([12, 12]);
  });

  it("flags a branch that mints its own key at the boundary where it is called again", async () => {
    const payments = new FakeProvider();
    const stock = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const tenantId = "par-broken";
    const report = await crashAtEveryBoundary(engine, makeOrder(payments, stock, "fresh"), input, {
      effects: { charges: () => payments.charges, reservations: () => stock.charges },
      tenantId,
      keyPrefix: "par-broken-",
    });
    expect(report.ok).toBe(false);
    const failed = report.failures.map((f) => f.point);
    expect(failed).toContain("called:branch:settle/reserve");
    const at = report.failures.find((f) => f.point === "called:branch:settle/reserve");
    expect(at?.problems.join("\n")).toMatch(/branch 'settle\/reserve' was called again after the crash/);
  });

  it("pauseAt holds one branch while the other is recorded", async () => {
    const payments = new FakeProvider();
    const stock = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const pause = pauseAt(engine, "called:branch:settle/charge", { key: "held" });
    const run = engine.runOnce(makeOrder(payments, stock), { tenantId: "par-pause", key: "held", input });
    await pause.reached;
    // The charge is held after its call; the reservation goes on to its record meanwhile.
    for (;;) {
      const history = (await engine.inspect("par-pause", "held"))?.history ?? [];
      if (history.some((h) => h.branch === "reserve" && h.outcome === "succeeded")) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const held = (await engine.inspect("par-pause", "held"))?.history?.find((h) => h.branch === "charge");
    expect(held?.outcome).toBe("started");
    pause.release();
    expect((await run).status).toBe(201);
  });
});
