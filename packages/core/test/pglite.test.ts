/**
 * The same workflow suite on embedded PGlite (the zero-setup default): one
 * in-memory instance for the file, one connection, so no concurrency cases.
 * Effects are counted as on Postgres: orders rows, provider calls, history.
 */
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  deriveStepKey,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  workflow,
} from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import type { TestDb } from "./support/db.ts";
import { countOrders, countRuns, historyOf, recordSnapshot } from "./support/effects.ts";
import { crashAt, waitPastCurrentLease } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";
import { openPGlite } from "./support/pglite.ts";

const MIGRATIONS = readdirSync(join(dirname(fileURLToPath(import.meta.url)), "../../../migrations"))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));

const T = "acme";
let db: TestDb;
let firstMigration: string[] = [];

beforeAll(async () => {
  ({ db, migrated: firstMigration } = await openPGlite());
}, 300_000);
afterAll(async () => {
  await db?.destroy();
});

function setup(): { engine: Engine; payments: FakePayments } & ReturnType<typeof makeCheckout> {
  const payments = new FakePayments();
  return { engine: createEngine({ db, leaseMs: 30_000 }), payments, ...makeCheckout(payments) };
}

describe("PGlite", () => {
  it("migrate() applies every file once; a second call returns []", async () => {
    expect(firstMigration).toEqual(MIGRATIONS);
    expect(await createEngine({ db }).migrate()).toEqual([]);
  });

  it("happy path and replay: one order, one charge, replayed verbatim", async () => {
    const s = setup();
    const input = { cartId: "c-happy", amountCents: 500 };
    const first = await s.engine.runOnce(s.workflow, { tenantId: T, key: "happy", input });
    expect(first).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
    const again = await s.engine.runOnce(s.workflow, { tenantId: T, key: "happy", input });
    expect(again).toEqual({ ...first, replayed: true });
    expect(s.counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(await countOrders(db, { cartId: "c-happy" })).toBe(1);
    expect(s.payments.calls.map((c) => c.key)).toEqual([deriveStepKey(T, "happy", "checkout", "charge")]);
    const rec = await s.engine.inspect(T, "happy");
    expect(rec).toMatchObject({ status: "completed", attempt: 1, recoveryPoint: "record_charge" });
    expect(rec?.response).toEqual({ status: 201, body: first.body, outcome: "succeeded" });
    expect(await historyOf(s.engine, T, "happy")).toEqual([
      "create_order:1:succeeded",
      "charge:1:succeeded",
      "record_charge:1:succeeded",
    ]);
  });

  it("mismatch: another payload or workflow on a completed key is 422 and changes nothing", async () => {
    const s = setup();
    const input = { cartId: "c-mm", amountCents: 500 };
    await s.engine.runOnce(s.workflow, { tenantId: T, key: "mm", input });
    const before = await recordSnapshot(s.engine, T, "mm");
    await expect(
      s.engine.runOnce(s.workflow, { tenantId: T, key: "mm", input: { ...input, amountCents: 501 } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyMismatchError);
    const other = makeCheckout(s.payments, { name: "checkout_v2" }).workflow;
    await expect(s.engine.runOnce(other, { tenantId: T, key: "mm", input })).rejects.toMatchObject({ httpStatus: 422 });
    expect(await recordSnapshot(s.engine, T, "mm")).toEqual(before);
    expect(s.counters.create_order).toBe(1);
  });

  it("invalid input: 400 before the claim, no row", async () => {
    const s = setup();
    await expect(
      s.engine.runOnce(s.workflow, { tenantId: "pgl-val", key: "v", input: { cartId: "c", amountCents: 0 } }),
    ).rejects.toBeInstanceOf(InputValidationError);
    expect(await countRuns(db, { tenantId: "pgl-val" })).toBe(0);
  });

  it("crash between a step's call and its record: 409 until released, then a takeover finishes with one charge", async () => {
    const s = setup();
    const input = { cartId: "c-crash", amountCents: 700 };
    const run = () => s.engine.runOnce(s.workflow, { tenantId: T, key: "crash", input });
    crashAt(s.engine, "called:step:charge");
    await expect(run()).rejects.toBeInstanceOf(CrashSignal);
    const error = await run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect((error as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
    const inFlight = await s.engine.inspect(T, "crash");
    expect(await s.engine.release(T, "crash")).toMatchObject({ status: "in_flight", ownerToken: null });
    const res = await run();
    expect(res).toMatchObject({ status: 201, replayed: false });
    const rec = await s.engine.inspect(T, "crash");
    expect(rec).toMatchObject({ status: "completed", attempt: 2 });
    expect(rec?.runId).toBe(inFlight?.runId);
    expect(s.counters).toEqual({ create_order: 1, charge: 2, record_charge: 1 });
    expect(new Set(s.payments.calls.map((c) => c.key))).toEqual(
      new Set([deriveStepKey(T, "crash", "checkout", "charge")]),
    );
    expect(s.payments.charges).toBe(1);
    expect(await countOrders(db, { cartId: "c-crash" })).toBe(1);
    expect(await historyOf(s.engine, T, "crash")).toEqual([
      "create_order:1:succeeded",
      "charge:1:interrupted",
      "charge:2:succeeded",
      "record_charge:2:succeeded",
    ]);
  });

  it("a phase that throws after writing rolls its writes back; a takeover resumes after the recovery point", async () => {
    let failures = 1;
    const wf = workflow("flaky")
      .phase("first", async ({ tx, tenantId }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o_flaky_1', ${tenantId}, 'c-flaky', 1)`.execute(
          tx,
        );
        return { one: true };
      })
      .phase("second", async ({ tx, tenantId }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o_flaky_2', ${tenantId}, 'c-flaky', 2)`.execute(
          tx,
        );
        if (failures-- > 0) throw new Error("constraint check failed downstream");
        return { two: true };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const engine = createEngine({ db, leaseMs: 30_000 });
    const run = () => engine.runOnce(wf, { tenantId: T, key: "flaky", input: {} });
    await expect(run()).rejects.toThrow("constraint check failed");
    expect(await countOrders(db, { cartId: "c-flaky" })).toBe(1);
    await engine.release(T, "flaky");
    expect(await run()).toMatchObject({ status: 200, body: { one: true, two: true } });
    expect(await countOrders(db, { cartId: "c-flaky" })).toBe(2);
    expect(await historyOf(engine, T, "flaky")).toEqual(["first:1:succeeded", "second:1:failed", "second:2:succeeded"]);
  });

  it("ctx.reject before the first commit deletes the claim; a retry with the same key runs", async () => {
    const closed = { value: true };
    const wf = workflow("reserve")
      .input(z.object({ cartId: z.string() }))
      .phase("hold", async ({ tx, tenantId, input, reject }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_${input.cartId}`}, ${tenantId}, ${input.cartId}, 1)`.execute(
          tx,
        );
        if (closed.value) reject(409, { error: "store_closed" });
        return { held: true };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const engine = createEngine({ db, leaseMs: 30_000 });
    const input = { cartId: "c-reject" };
    expect(await engine.runOnce(wf, { tenantId: T, key: "reject", input })).toEqual({
      status: 409,
      body: { error: "store_closed" },
      replayed: false,
      outcome: "rejected",
    });
    expect(await engine.inspect(T, "reject")).toBeNull();
    expect(await countOrders(db, { cartId: "c-reject" })).toBe(0);
    closed.value = false;
    expect(await engine.runOnce(wf, { tenantId: T, key: "reject", input })).toMatchObject({
      status: 201,
      outcome: "succeeded",
    });
    expect(await countOrders(db, { cartId: "c-reject" })).toBe(1);
  });

  it("ctx.fail in a step is stored and replayed (outcome failed); the step is not called again", async () => {
    let calls = 0;
    const wf = workflow("declined")
      .step("charge", ({ fail }) => {
        calls++;
        return fail(402, { error: "card_declined" });
      })
      .respond(() => ({ status: 201, body: {} }));
    const engine = createEngine({ db, leaseMs: 30_000 });
    const first = await engine.runOnce(wf, { tenantId: T, key: "fail", input: {} });
    expect(first).toEqual({ status: 402, body: { error: "card_declined" }, replayed: false, outcome: "failed" });
    expect(await engine.runOnce(wf, { tenantId: T, key: "fail", input: {} })).toEqual({ ...first, replayed: true });
    expect(calls).toBe(1);
    expect((await engine.inspect(T, "fail"))?.response).toEqual({ status: 402, body: first.body, outcome: "failed" });
  });

  it("the heartbeat renews over the single connection while a step works (no takeover, attempt 1)", async () => {
    const engine = createEngine({ db, leaseMs: 1500, heartbeatMs: 100 });
    let started!: () => void;
    const inStep = new Promise<void>((r) => {
      started = r;
    });
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    const wf = workflow("slow_pglite")
      .step("work", async () => {
        started();
        await finished;
        return { done: true };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const running = engine.runOnce(wf, { tenantId: T, key: "slow", input: {} }).catch((e: unknown) => e);
    await inStep;
    // Past the lease the run held a moment ago: only a renewal can have kept it.
    await waitPastCurrentLease(db, T, "slow");
    await expect(engine.runOnce(wf, { tenantId: T, key: "slow", input: {} })).rejects.toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
    finish();
    expect(await running).toMatchObject({ status: 200, replayed: false });
    expect((await engine.inspect(T, "slow"))?.attempt).toBe(1);
  });
});
