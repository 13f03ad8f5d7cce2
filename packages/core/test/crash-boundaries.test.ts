/**
 * A crash at every boundary of the SPEC checkout, then a client retry once
 * the lease is gone (released at once, or lapsed because the crash stopped
 * the heartbeat). Whatever the boundary, the effects happen once: one order
 * row, one record_charge, one distinct charge under one derived key.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Engine, RunResult } from "../src/index.ts";
import { createEngine, deriveStepKey, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { countOrders, historyOf } from "./support/effects.ts";
import { CHECKOUT_POINTS, type CheckoutPoint, crashAt, sleep } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const T = "acme";
const LAST: CheckoutPoint = "after:phase:record_charge";
const FIRST: CheckoutPoint = "before:phase:create_order";

const S = "succeeded";
/** The history each crash must leave once the retry has finished (`name:attempt:outcome`). */
const EXPECTED_HISTORY: Record<CheckoutPoint, string[]> = {
  // The first phase holds the claim: a crash before it left no record, and the retry is a first attempt.
  "before:phase:create_order": [`create_order:1:${S}`, `charge:1:${S}`, `record_charge:1:${S}`],
  "after:phase:create_order": [`create_order:1:${S}`, `charge:2:${S}`, `record_charge:2:${S}`],
  // The start was recorded before the crash; the retry marks that in-doubt entry interrupted.
  "before:step:charge": [`create_order:1:${S}`, "charge:1:interrupted", `charge:2:${S}`, `record_charge:2:${S}`],
  "called:step:charge": [`create_order:1:${S}`, "charge:1:interrupted", `charge:2:${S}`, `record_charge:2:${S}`],
  "after:step:charge": [`create_order:1:${S}`, `charge:1:${S}`, `record_charge:2:${S}`],
  "before:phase:record_charge": [`create_order:1:${S}`, `charge:1:${S}`, `record_charge:2:${S}`],
  // The last commit completed the run: the retry is a replay, nothing runs again.
  "after:phase:record_charge": [`create_order:1:${S}`, `charge:1:${S}`, `record_charge:1:${S}`],
};

/** Provider calls per boundary: only a crash between the call and its record repeats the call. */
const EXPECTED_CALLS: Record<CheckoutPoint, number> = {
  "before:phase:create_order": 1,
  "after:phase:create_order": 1,
  "before:step:charge": 1,
  "called:step:charge": 2,
  "after:step:charge": 1,
  "before:phase:record_charge": 1,
  "after:phase:record_charge": 1,
};

type Expect = typeof expect;

/** Retry until the key is no longer in flight with a valid lease (the lease lapses on its own). */
async function retryPast409<B>(
  call: () => Promise<RunResult<B>>,
  timeoutMs: number,
): Promise<{ result: RunResult<B>; refused: number }> {
  const deadline = Date.now() + timeoutMs;
  for (let refused = 0; ; refused++) {
    try {
      return { result: await call(), refused };
    } catch (error) {
      if (!(error instanceof IdempotencyKeyInProgressError) || Date.now() > deadline) throw error;
      await sleep(Math.min(100, Math.max(10, error.retryAfterMs)));
    }
  }
}

async function crashThenRetry(
  exp: Expect,
  engine: Engine,
  point: CheckoutPoint,
  key: string,
  mode: "release" | "lapse",
) {
  const payments = new FakePayments();
  const { workflow: checkout, counters } = makeCheckout(payments);
  const input = { cartId: `c-${key}`, amountCents: 4200 };
  const run = () => engine.runOnce(checkout, { tenantId: T, key, input });
  // The engine's first claim goes alone (it reads the driver); from the second on a new key is claimed in
  // the first phase, which is what a crash before that phase has to meet.
  const warm = workflow("warm").respond(() => ({ status: 200, body: null }));
  await engine.runOnce(warm, { tenantId: T, key: `warm-${key}`, input: {} });
  const crash = crashAt(engine, point, { key });

  const first = await run().then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error }),
  );
  exp(
    crash.fired,
    `fault point ${point} was never reached (the first call returned ${JSON.stringify(first.value)})`,
  ).toBe(1);
  exp(first.error).toBeInstanceOf(CrashSignal);

  const completedBeforeCrash = point === LAST;
  // The claim commits with the first phase: a crash before that phase left no record at all.
  const noRecord = point === FIRST;
  let result: RunResult<unknown>;
  if (noRecord) {
    exp(await engine.inspect(T, key)).toBeNull();
    result = await run();
  } else if (completedBeforeCrash) {
    result = await run();
  } else {
    // Until the lease is gone the crashed attempt still holds the key.
    const early = await run().catch((e: unknown) => e);
    exp(early).toBeInstanceOf(IdempotencyKeyInProgressError);
    exp((early as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
    if (mode === "release") {
      exp(await engine.release(T, key)).toMatchObject({ status: "in_flight", ownerToken: null });
      result = await run();
    } else {
      result = (await retryPast409(run, 5_000)).result;
    }
  }

  exp(result).toMatchObject({ status: 201, replayed: completedBeforeCrash, outcome: "succeeded" });
  const body = result.body as { orderId: string; chargeId: string };

  // Business effects: one order, paid with the one charge the client was told about.
  exp(await countOrders(t.db, { cartId: input.cartId })).toBe(1);
  const { rows } = await sql<{ id: string; status: string; charge_id: string | null }>`
    SELECT id, status, charge_id FROM orders WHERE cart_id = ${input.cartId}`.execute(t.db);
  exp(rows).toEqual([{ id: body.orderId, status: "paid", charge_id: body.chargeId }]);
  exp(counters.create_order).toBe(1);
  exp(counters.record_charge).toBe(1);

  // Provider: at most two calls, all under the one derived key, one distinct charge.
  const derived = deriveStepKey(T, key, "checkout", "charge");
  exp(payments.calls.length).toBe(EXPECTED_CALLS[point]);
  exp(payments.calls.length).toBeLessThanOrEqual(2);
  exp(new Set(payments.calls.map((c) => c.key))).toEqual(new Set([derived]));
  exp(payments.charges).toBe(1);

  const rec = await engine.inspect(T, key);
  exp(rec).toMatchObject({
    status: "completed",
    attempt: completedBeforeCrash || noRecord ? 1 : 2,
    ownerToken: null,
  });
  exp(rec?.response).toEqual({ status: 201, body, outcome: "succeeded" });
  exp(await historyOf(engine, T, key)).toEqual(EXPECTED_HISTORY[point]);
  const step = rec?.history?.filter((h) => h.kind === "step" && h.outcome === "succeeded");
  exp(step?.map((h) => h.derivedKey)).toEqual([derived]);
}

describe("crash at each boundary, retry after engine.release", () => {
  for (const point of CHECKOUT_POINTS) {
    it(`crash at ${point}: the retry finishes the run with every effect once`, async () => {
      const engine = createEngine({ db: t.db, leaseMs: 30_000 });
      await crashThenRetry(expect, engine, point, `rel-${point}`, "release");
    });
  }
});

describe.concurrent("crash at each boundary with the heartbeat on: the lease lapses and a retry takes over", () => {
  // After the last commit the run is complete: there is no lease left to lapse.
  for (const point of CHECKOUT_POINTS.filter((p) => p !== LAST && p !== FIRST)) {
    it(`crash at ${point}: the heartbeat stops, the lease lapses, the retry finishes the run`, async ({
      expect: exp,
    }) => {
      // Default heartbeat: a third of the lease. Only a stopped heartbeat lets the lease run out.
      const engine = createEngine({ db: t.db, leaseMs: 1000 });
      await crashThenRetry(exp, engine, point, `hb-${point}`, "lapse");
    });
  }
});

describe("errors that are not crashes", () => {
  it("a phase throws after writing: its writes roll back, the key waits for its lease, a takeover finishes", async () => {
    const payments = new FakePayments();
    let failures = 1;
    const flaky = workflow("checkout")
      .phase("create_order", async ({ tx, tenantId, key }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_${key}`}, ${tenantId}, ${`c-${key}`}, 10)`.execute(
          tx,
        );
        return { orderId: `o_${key}` };
      })
      .step("charge", ({ state, idempotencyKey }) => ({
        chargeId: payments.charge({ orderId: state.orderId, amountCents: 10 }, idempotencyKey).id,
      }))
      .phase("record_charge", async ({ tx, state }) => {
        await sql`UPDATE orders SET status = 'paid', charge_id = ${state.chargeId} WHERE id = ${state.orderId}`.execute(
          tx,
        );
        if (failures-- > 0) throw new Error("deadline exceeded talking to the ledger");
        return {};
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const engine = createEngine({ db: t.db, leaseMs: 30_000 });
    const run = () => engine.runOnce(flaky, { tenantId: T, key: "err-phase", input: {} });
    await expect(run()).rejects.toThrow("deadline exceeded");
    const { rows } = await sql<{ status: string }>`SELECT status FROM orders WHERE id = 'o_err-phase'`.execute(t.db);
    expect(rows).toEqual([{ status: "created" }]);
    await expect(run()).rejects.toBeInstanceOf(IdempotencyKeyInProgressError);
    await engine.release(T, "err-phase");
    expect((await run()).status).toBe(201);
    expect(await historyOf(engine, T, "err-phase")).toEqual([
      `create_order:1:${S}`,
      `charge:1:${S}`,
      "record_charge:1:failed",
      `record_charge:2:${S}`,
    ]);
    expect(payments.charges).toBe(1);
  });

  it("the provider charged but the response was lost: the resumed step calls again with the same key, one charge", async () => {
    const payments = new FakePayments();
    let lose = 1;
    const lossy = workflow("checkout")
      .step("charge", ({ idempotencyKey }) => {
        const charge = payments.charge({ orderId: "o_lost", amountCents: 10 }, idempotencyKey);
        if (lose-- > 0) throw new Error("socket hang up");
        return { chargeId: charge.id };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const engine = createEngine({ db: t.db, leaseMs: 30_000 });
    const run = () => engine.runOnce(lossy, { tenantId: T, key: "err-lost", input: {} });
    await expect(run()).rejects.toThrow("socket hang up");
    await engine.release(T, "err-lost");
    expect(await run()).toMatchObject({ status: 201, body: { chargeId: "ch_1" } });
    expect(payments.calls.map((c) => c.key)).toEqual([
      deriveStepKey(T, "err-lost", "checkout", "charge"),
      deriveStepKey(T, "err-lost", "checkout", "charge"),
    ]);
    expect(payments.charges).toBe(1);
    expect(await historyOf(engine, T, "err-lost")).toEqual(["charge:1:failed", `charge:2:${S}`]);
  });
});
