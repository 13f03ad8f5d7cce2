/**
 * Field fault of the kind "error caching (claim release)": a request refused
 * before any work (invalid input, ctx.reject in the first phase) must leave
 * nothing claimed, so the corrected retry runs at once; a reject after a
 * commit is a usage error that keeps the record.
 */
import { sql } from "kysely";
import { ulid } from "ulid";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import { createEngine, InputValidationError, WorkflowUsageError, workflow } from "../src/index.ts";
import { countOrders, countRuns, rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const payments = new FakePayments();
const counters = { create_order: 0, charge: 0, record_charge: 0 };
let balanceCents = 100;
let engine: Engine;

/** The checkout, refusing in create_order when the balance is too low, and misusing reject in charge for key 'k3'. */
const checkout = workflow("checkout")
  .input(z.object({ cartId: z.string(), amountCents: z.number().int().positive() }))
  .phase("create_order", async ({ tx, tenantId, input, reject }) => {
    counters.create_order++;
    const orderId = `o_${ulid()}`;
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${orderId}, ${tenantId}, ${input.cartId}, ${input.amountCents})`.execute(
      tx,
    );
    if (input.amountCents > balanceCents) reject(402, { code: "insufficient_balance" });
    return { orderId };
  })
  .step("charge", async ({ key, state, input, idempotencyKey, reject }) => {
    if (key === "k3") reject(402, { code: "card_declined" });
    counters.charge++;
    return { chargeId: payments.charge({ orderId: state.orderId, amountCents: input.amountCents }, idempotencyKey).id };
  })
  .phase("record_charge", async ({ tx, state }) => {
    counters.record_charge++;
    await sql`UPDATE orders SET status = 'paid', charge_id = ${state.chargeId} WHERE id = ${state.orderId}`.execute(tx);
    return {};
  })
  .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));

beforeAll(() => {
  engine = createEngine({ db: t.db, leaseMs: 1000 });
});

const call = (key: string, amountCents: number) =>
  engine.runOnce(checkout, { tenantId: "t1", key, input: { cartId: "c1", amountCents } });

async function historyRows(key: string): Promise<number> {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM idempo.run_history WHERE key = ${key}`.execute(t.db);
  return rows[0]?.n ?? 0;
}

describe("error caching: refused requests leave no claim behind (BR-15)", () => {
  it("zod-invalid input answers 400 twice with no row and no 409; the corrected retry runs without 422", async () => {
    for (let i = 0; i < 2; i++) {
      const error = await rejectionOf(call("k1", -5));
      expect(error).toBeInstanceOf(InputValidationError);
      expect(error).toMatchObject({ code: "invalid_input", httpStatus: 400 });
      expect((error as InputValidationError).issues[0]?.path).toBe("$.amountCents");
      expect(await countRuns(t.db, { key: "k1" })).toBe(0);
    }
    expect(counters.create_order).toBe(0);
    const ok = await call("k1", 50);
    expect(ok).toMatchObject({ status: 201, replayed: false });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
  });

  it("ctx.reject(402) in create_order deletes the claim and its writes; the retry after a top-up runs fully, then replays", async () => {
    const before = { ...counters, orders: await countOrders(t.db), calls: payments.calls.length };
    const refused = await call("k2", 5000);
    expect(refused).toEqual({
      status: 402,
      body: { code: "insufficient_balance" },
      replayed: false,
      outcome: "rejected",
    });
    expect(await engine.inspect("t1", "k2")).toBeNull();
    expect(await countRuns(t.db, { key: "k2" })).toBe(0);
    expect(await historyRows("k2")).toBe(0);
    expect(await countOrders(t.db)).toBe(before.orders);
    expect(payments.calls).toHaveLength(before.calls);

    // Refused again while the balance is still low: still no record, never 409.
    expect(await call("k2", 5000)).toMatchObject({ status: 402, outcome: "rejected", replayed: false });
    expect(await countRuns(t.db, { key: "k2" })).toBe(0);

    balanceCents = 10_000;
    const paid = await call("k2", 5000);
    expect(paid).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
    expect(counters.create_order - before.create_order).toBe(3);
    expect(counters.charge - before.charge).toBe(1);
    expect(await countOrders(t.db)).toBe(before.orders + 1);
    expect(await call("k2", 5000)).toEqual({ ...paid, replayed: true });
    expect(counters.charge - before.charge).toBe(1);
  });

  it("ctx.reject in step charge after create_order committed is a WorkflowUsageError; the record stays at create_order, no charge", async () => {
    const callsBefore = payments.calls.length;
    const error = await rejectionOf(call("k3", 20));
    expect(error).toBeInstanceOf(WorkflowUsageError);
    expect(error).toMatchObject({ code: "workflow_usage" });
    expect(error.message).toMatch(/reject/);
    expect(error.message).toContain("charge");
    expect(error.message).toContain("create_order");
    const rec = await engine.inspect("t1", "k3");
    expect(rec).toMatchObject({ status: "in_flight", recoveryPoint: "create_order", response: null });
    expect(rec?.state).toEqual({ orderId: expect.any(String) });
    expect(payments.calls).toHaveLength(callsBefore);
    expect(await countRuns(t.db, { key: "k3" })).toBe(1);
  });
});
