/**
 * The owner's own answers: `ctx.reject` (delete the claim, store nothing)
 * and `ctx.fail` (store the answer and replay it), with their effects and
 * history counted against real Postgres.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, IdempotencyKeyInProgressError, WorkflowUsageError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { countHistory, countOrders, countRuns, recordSnapshot } from "./support/effects.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const T = "acme";
const LEASE = 30_000;

describe("ctx.reject", () => {
  function reserveWorkflow(opts: { soldOut: { value: boolean }; rejectIn: "first" | "second" }) {
    return workflow("reserve")
      .input(z.object({ cartId: z.string() }))
      .phase("hold_stock", async ({ tx, tenantId, input, reject }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_hold_${input.cartId}`}, ${tenantId}, ${input.cartId}, 1)`.execute(
          tx,
        );
        if (opts.rejectIn === "first" && opts.soldOut.value) reject(409, { error: "sold_out" });
        return { held: true };
      })
      .phase("confirm", async ({ tx, tenantId, input, reject }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_conf_${input.cartId}`}, ${tenantId}, ${`${input.cartId}-confirm`}, 1)`.execute(
          tx,
        );
        if (opts.rejectIn === "second" && opts.soldOut.value) reject(409, { error: "sold_out" });
        return { confirmed: true };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
  }

  it("before the first commit: deletes the claim, rolls back the phase's writes, and a retry runs at once", async () => {
    const soldOut = { value: true };
    const wf = reserveWorkflow({ soldOut, rejectIn: "first" });
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const res = await engine.runOnce(wf, { tenantId: T, key: "rej-1", input: { cartId: "c-rej1" } });
    expect(res).toEqual({ status: 409, body: { error: "sold_out" }, replayed: false, outcome: "rejected" });
    expect(await engine.inspect(T, "rej-1")).toBeNull();
    expect([await countRuns(t.db, { tenantId: T, key: "rej-1" }), await countHistory(t.db, T, "rej-1")]).toEqual([
      0, 0,
    ]);
    expect(await countOrders(t.db, { cartId: "c-rej1" })).toBe(0);
    soldOut.value = false;
    const retry = await engine.runOnce(wf, { tenantId: T, key: "rej-1", input: { cartId: "c-rej1" } });
    expect(retry).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
    expect(await countOrders(t.db, { cartId: "c-rej1" })).toBe(1);
    expect((await engine.inspect(T, "rej-1"))?.attempt).toBe(1);
  });

  it("in a first step (history already has its start): no row and no history left behind", async () => {
    const quote = workflow("quote")
      .step("price", ({ reject }) => reject(422, { error: "no_price" }))
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const res = await engine.runOnce(quote, { tenantId: T, key: "rej-2", input: {} });
    expect(res).toMatchObject({ status: 422, outcome: "rejected" });
    expect([await countRuns(t.db, { tenantId: T, key: "rej-2" }), await countHistory(t.db, T, "rej-2")]).toEqual([
      0, 0,
    ]);
  });

  it("after a phase committed: WorkflowUsageError, the record stays at its recovery point, the rejecting phase rolls back", async () => {
    const wf = reserveWorkflow({ soldOut: { value: true }, rejectIn: "second" });
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const error = await engine.runOnce(wf, { tenantId: T, key: "rej-3", input: { cartId: "c-rej3" } }).catch((e) => e);
    expect(error).toBeInstanceOf(WorkflowUsageError);
    expect((error as Error).message).toMatch(/confirm/);
    expect((error as Error).message).toMatch(/hold_stock/);
    expect(await recordSnapshot(engine, T, "rej-3")).toMatchObject({
      status: "in_flight",
      recoveryPoint: "hold_stock",
      attempt: 1,
    });
    expect(await countOrders(t.db, { cartId: "c-rej3" })).toBe(1);
    expect(await countOrders(t.db, { cartId: "c-rej3-confirm" })).toBe(0);
    await expect(engine.runOnce(wf, { tenantId: T, key: "rej-3", input: { cartId: "c-rej3" } })).rejects.toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
  });
});

describe("ctx.fail", () => {
  function declining(payments: FakePayments, counts: { charge: number; record: number }) {
    return workflow("pay")
      .input(z.object({ cartId: z.string(), amountCents: z.number().int() }))
      .phase("create_order", async ({ tx, tenantId, input }) => {
        const orderId = `o_pay_${input.cartId}`;
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${orderId}, ${tenantId}, ${input.cartId}, ${input.amountCents})`.execute(
          tx,
        );
        return { orderId };
      })
      .step("charge", ({ state, input, idempotencyKey, fail }) => {
        counts.charge++;
        const { id } = payments.charge({ orderId: state.orderId, amountCents: input.amountCents }, idempotencyKey);
        return fail(402, { error: "card_declined", orderId: state.orderId, attemptedCharge: id });
      })
      .phase("record_charge", () => {
        counts.record++;
        return {};
      })
      .respond(({ state }) => ({ status: 201, body: state }));
  }

  it("in a step: stores the response (outcome failed) and replays it verbatim without calling again", async () => {
    const payments = new FakePayments();
    const counts = { charge: 0, record: 0 };
    const wf = declining(payments, counts);
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const input = { cartId: "c-fail", amountCents: 100 };
    const first = await engine.runOnce(wf, { tenantId: T, key: "fail-1", input });
    expect(first).toEqual({
      status: 402,
      body: { error: "card_declined", orderId: "o_pay_c-fail", attemptedCharge: "ch_1" },
      replayed: false,
      outcome: "failed",
    });
    const again = await engine.runOnce(wf, { tenantId: T, key: "fail-1", input });
    expect(again).toEqual({ ...first, replayed: true });
    expect(counts).toEqual({ charge: 1, record: 0 });
    expect(payments.calls).toHaveLength(1);
    const rec = await engine.inspect(T, "fail-1");
    expect(rec).toMatchObject({ status: "completed", recoveryPoint: "create_order", ownerToken: null });
    expect(rec?.response).toEqual({ status: 402, body: first.body, outcome: "failed" });
    expect(await countOrders(t.db, { cartId: "c-fail" })).toBe(1);
  });

  it("in a phase: the phase's writes commit together with the stored response, which replays", async () => {
    let runs = 0;
    const wf = workflow("hold")
      .input(z.object({ cartId: z.string() }))
      .phase("create_order", async ({ tx, tenantId, input, fail }) => {
        runs++;
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_${input.cartId}`}, ${tenantId}, ${input.cartId}, 1)`.execute(
          tx,
        );
        return fail(409, { error: "duplicate_cart" });
      })
      .phase("never", () => ({ reached: true }))
      .respond(() => ({ status: 201, body: {} }));
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const first = await engine.runOnce(wf, { tenantId: T, key: "fail-3", input: { cartId: "c-fail3" } });
    expect(first).toEqual({ status: 409, body: { error: "duplicate_cart" }, replayed: false, outcome: "failed" });
    expect(await engine.runOnce(wf, { tenantId: T, key: "fail-3", input: { cartId: "c-fail3" } })).toEqual({
      ...first,
      replayed: true,
    });
    expect(runs).toBe(1);
    expect(await countOrders(t.db, { cartId: "c-fail3" })).toBe(1);
    expect(await recordSnapshot(engine, T, "fail-3")).toMatchObject({
      status: "completed",
      response: { status: 409, outcome: "failed" },
    });
  });

  it("in a phase: the history records the phase that answered instead of omitting it", async () => {
    const wf = workflow("hold2")
      .phase("create_order", ({ fail }) => fail(409, { error: "duplicate_cart" }))
      .respond(() => ({ status: 201, body: {} }));
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    await engine.runOnce(wf, { tenantId: T, key: "fail-4", input: {} });
    const history = (await engine.inspect(T, "fail-4"))?.history ?? [];
    expect(history.map((h) => h.name)).toEqual(["create_order"]);
    expect(history[0]?.finishedAt).not.toBeNull();
  });

  it("in a step: the history closes the step's entry instead of leaving it started (in doubt) on a completed run", async () => {
    const wf = declining(new FakePayments(), { charge: 0, record: 0 });
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    await engine.runOnce(wf, { tenantId: T, key: "fail-2", input: { cartId: "c-fail2", amountCents: 100 } });
    const charge = (await engine.inspect(T, "fail-2"))?.history?.find((h) => h.name === "charge");
    expect(charge?.outcome).not.toBe("started");
    expect(charge?.finishedAt).not.toBeNull();
  });
});
