/**
 * Field fault of the kind "scoping (operation and target)": a key names one
 * intent, so the same key used for another workflow, or for the same
 * workflow on another target, is a mismatch (422), never a replay of the
 * first operation's answer.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine, RunResult } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, IdempotencyKeyMismatchError, workflow } from "../src/index.ts";
import { raceThroughBarrier, rejectionOf } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const payments = new FakePayments();
const { workflow: checkout, counters } = makeCheckout(payments);
let refunds = 0;
let cancels = 0;

/** Same input shape as checkout, another operation. */
const refund = workflow("refund")
  .input(z.object({ cartId: z.string(), amountCents: z.number().int().positive() }))
  .phase("refund", () => {
    refunds++;
    return { refunded: true };
  })
  .respond(() => ({ status: 201, body: { refunded: true } }));

/** DELETE /orders/:id: the target id comes from the path and is part of the input. */
const cancelOrder = workflow("cancel_order")
  .input(z.object({ orderId: z.string() }))
  .phase("cancel", async ({ tx, input }) => {
    cancels++;
    await sql`UPDATE orders SET status = 'cancelled' WHERE id = ${input.orderId}`.execute(tx);
    return {};
  })
  .respond(() => ({ status: 204, body: null }));

let engine: Engine;
let engine2: Engine;
beforeAll(async () => {
  engine = createEngine({ db: t.db, leaseMs: 1000 });
  engine2 = createEngine({ db: t.connect(4), leaseMs: 1000 });
  await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o1', 't1', 'c', 1), ('o2', 't1', 'c', 1)`.execute(
    t.db,
  );
});

const body = { cartId: "c1", amountCents: 500 };

async function orderStatus(id: string): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`SELECT status FROM orders WHERE id = ${id}`.execute(t.db);
  return rows[0]?.status;
}

describe("scoping (operation and target): a key reused for another operation (BR-17)", () => {
  it("answers 422 when k1 of checkout is reused for refund with the identical body; refund does not run", async () => {
    const first = await engine.runOnce(checkout, { tenantId: "t1", key: "k1", input: body });
    expect(first).toMatchObject({ status: 201, replayed: false });
    const before = await engine.inspect("t1", "k1");
    const error = await rejectionOf(engine.runOnce(refund, { tenantId: "t1", key: "k1", input: body }));
    expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(error.message).toContain("checkout");
    expect(refunds).toBe(0);
    expect(await engine.inspect("t1", "k1")).toEqual(before);
    expect(await engine.runOnce(checkout, { tenantId: "t1", key: "k1", input: body })).toEqual({
      ...first,
      replayed: true,
    });
  });

  it("answers 422 when k2 of cancel(o1) is reused for cancel(o2); o2 stays active", async () => {
    const first = await engine.runOnce(cancelOrder, { tenantId: "t1", key: "k2", input: { orderId: "o1" } });
    expect(first).toEqual({ status: 204, body: null, replayed: false, outcome: "succeeded" });
    const error = await rejectionOf(
      engine.runOnce(cancelOrder, { tenantId: "t1", key: "k2", input: { orderId: "o2" } }),
    );
    expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(await orderStatus("o1")).toBe("cancelled");
    expect(await orderStatus("o2")).toBe("created");
    expect(cancels).toBe(1);
  });

  it("checkout and refund racing for one key: exactly one executes, the other gets 409 or 422, the record is the winner's", async () => {
    for (let round = 0; round < 10; round++) {
      const key = `k3-${round}`;
      const before = { checkout: counters.create_order, refund: refunds };
      const results = await raceThroughBarrier<RunResult<unknown>>(2, (i) =>
        i === 0
          ? engine.runOnce(checkout, { tenantId: "t1", key, input: body })
          : engine2.runOnce(refund, { tenantId: "t1", key, input: body }),
      );
      const winners = results.flatMap((r, i) => (r.ok ? [{ i, value: r.value }] : []));
      expect(winners, `round ${round}`).toHaveLength(1);
      const loser = results.find((r) => !r.ok) as { error: unknown };
      expect(
        loser.error instanceof IdempotencyKeyMismatchError || loser.error instanceof IdempotencyKeyInProgressError,
        `round ${round}: ${String(loser.error)}`,
      ).toBe(true);
      const winner = winners[0] as { i: number; value: { status: number; body: unknown; replayed: boolean } };
      expect(winner.value.replayed).toBe(false);
      const executions = counters.create_order - before.checkout + (refunds - before.refund);
      expect(executions).toBe(1);
      const rec = await engine.inspect("t1", key);
      expect(rec).toMatchObject({
        workflow: winner.i === 0 ? "checkout" : "refund",
        status: "completed",
        attempt: 1,
        response: { status: winner.value.status, body: winner.value.body },
      });
    }
  });
});
