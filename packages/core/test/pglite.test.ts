/**
 * The same workflow suite on embedded PGlite (the zero-setup default): one
 * in-memory instance for the file, one connection, so no concurrency cases.
 * Effects are counted as on Postgres: orders rows, provider calls, history.
 */
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
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
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import type { TestDb } from "./support/db.ts";
import { countOrders, countRuns, historyOf, recordSnapshot } from "./support/effects.ts";
import { crashAt, waitPastCurrentLease } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const MIGRATIONS = readdirSync(join(dirname(fileURLToPath(import.meta.url)), "../../../migrations"))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));

const T = "acme";
let pglite: PGlite;
let db: TestDb;
let firstMigration: string[] = [];

beforeAll(async () => {
  pglite = await PGlite.create();
  db = new Kysely({ dialect: new PGliteDialect(pglite) });
  firstMigration = await createEngine({ db }).migrate();
  await sql`
    CREATE TABLE orders (
      id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
      amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text
    )`.execute(db);
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

describe("PGlite: durable waits and background runs", () => {
  it("enqueue in a transaction, a worker woken by LISTEN, a signal retried twice, a timeout, engine.wait", async () => {
    const engine = createEngine({ db, listen: pglite });
    const effects = { charge: 0, capture: 0, voided: 0 };
    const threeDs = workflow("pglite_3ds")
      .input(z.object({ order: z.string() }))
      .step("charge", ({ input }) => {
        effects.charge++;
        return { chargeId: `ch_${input.order}` };
      })
      .waitFor("confirmed", {
        timeoutMs: 3_600_000,
        schema: z.object({ ok: z.boolean() }),
        onTimeout: (ctx) => {
          effects.voided++;
          return ctx.fail(402, { voided: true });
        },
      })
      .phase("capture", ({ state }) => {
        effects.capture++;
        return { captured: state.chargeId };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const worker = engine.startWorker({ workflows: [threeDs], intervalMs: 600_000, listen: pglite, sweep: false });
    try {
      await db.transaction().execute(async (tx) => {
        await engine.enqueue(tx, threeDs, { tenantId: T, key: "3ds-a", input: { order: "a" } });
        await engine.enqueue(tx, threeDs, { tenantId: T, key: "3ds-b", input: { order: "b" } });
      });
      await expect
        .poll(async () => (await engine.inspect(T, "3ds-a"))?.waitingFor?.name, { timeout: 120_000 })
        .toBe("confirmed");
      await expect
        .poll(async () => (await engine.inspect(T, "3ds-b"))?.waitingFor?.name, { timeout: 120_000 })
        .toBe("confirmed");
      // The provider's webhook, delivered three times.
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(false);
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(true);
      expect((await engine.signal(T, "3ds-a", "confirmed", { ok: true })).duplicate).toBe(true);
      expect(await engine.wait(T, "3ds-a", { timeoutMs: 120_000 })).toMatchObject({
        status: 201,
        body: { captured: "ch_a", confirmed: { ok: true } },
      });
      // The second order is never confirmed: its timeout passes.
      await sql`UPDATE idempo.runs SET wake_at = now() WHERE tenant_id = ${T} AND key = '3ds-b'`.execute(db);
      // Moving the time by hand notifies no one (the worker would look again at the old wake-up time, an hour away).
      await sql`SELECT pg_notify('idempo_due', 'pglite_3ds')`.execute(db);
      expect(await engine.wait(T, "3ds-b", { timeoutMs: 120_000 })).toMatchObject({
        status: 402,
        body: { voided: true },
      });
      expect(effects).toEqual({ charge: 2, capture: 1, voided: 1 });
    } finally {
      await worker.stop();
    }
  });

  it("signal with { tx } inside the application's transaction (one connection: without tx it would wait for it)", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_signal_tx")
      .waitFor("confirmed", { schema: z.object({ ok: z.boolean() }) })
      .respond(({ state }) => ({ status: 201, body: state }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "stx", input: {} })).status).toBe(202);
    await expect(
      db.transaction().execute(async (tx) => {
        await engine.signal(T, "stx", "confirmed", { ok: false }, { tx });
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    expect((await engine.inspect(T, "stx"))?.status).toBe("suspended");
    await db.transaction().execute(async (tx) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o-stx', ${T}, 'c', 1)`.execute(tx);
      expect(await engine.signal(T, "stx", "confirmed", { ok: true }, { tx })).toEqual({
        duplicate: false,
        woke: true,
      });
    });
    expect(await engine.runOnce(wf, { tenantId: T, key: "stx", input: {} })).toMatchObject({
      status: 201,
      body: { confirmed: { ok: true } },
    });
  });

  it("sleep: 202, then resumed by runOnce once due", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_sleep")
      .sleep("nap", 60_000)
      .respond(() => ({ status: 200, body: { woke: true } }));
    expect((await engine.runOnce(wf, { tenantId: T, key: "nap", input: {} })).status).toBe(202);
    await sql`UPDATE idempo.runs SET wake_at = now() - interval '1 second' WHERE tenant_id = ${T} AND key = 'nap'`.execute(
      db,
    );
    expect(await engine.runOnce(wf, { tenantId: T, key: "nap", input: {} })).toMatchObject({
      status: 200,
      body: { woke: true },
    });
  });
});

describe("PGlite: outbox keys and step tries", () => {
  it("retryFrom keeps a message's delivery key, resendOutbox derives the next round's; a retried step keeps its tries", async () => {
    const engine = createEngine({ db });
    const keys: string[] = [];
    let calls = 0;
    const wf = workflow("pg_outbox_keys")
      .phase("notify", async ({ outbox }) => {
        keys.push(await outbox.enqueue("receipt.email", {}));
        return {};
      })
      .step(
        "charge",
        () => {
          if (++calls === 1) throw new Error("transient");
          return { charged: true };
        },
        { retries: 1, retryable: () => true, backoffMs: 1, maxBackoffMs: 1 },
      )
      .respond(() => ({ status: 201, body: null }));
    const crashing = createEngine({ db });
    setFaultHook(crashing, (point) => {
      if (point === "after:phase:notify") throw new CrashSignal(point);
    });
    await crashing.runOnce(wf, { tenantId: T, key: "ob-1", input: {} }).catch(() => undefined);
    await engine.release(T, "ob-1");
    await engine.retryFrom(T, "ob-1", "notify", { resendOutbox: true });
    await crashing.runOnce(wf, { tenantId: T, key: "ob-1", input: {} }).catch(() => undefined);
    await engine.release(T, "ob-1");
    await engine.retryFrom(T, "ob-1", "notify");
    expect(await engine.runOnce(wf, { tenantId: T, key: "ob-1", input: {} })).toMatchObject({ status: 201 });
    const resent = `dlv_${createHash("sha256").update(`${keys[0]}:1`).digest("base64url")}`;
    expect(keys).toEqual([keys[0], resent, resent]);
    const step = (await engine.inspect(T, "ob-1"))?.history?.find((h) => h.kind === "step");
    expect(step?.tries?.map((x) => x.error)).toEqual(["transient", null]);
  });

  it("a schedule fires on PGlite: ticks missed while no worker ran are caught up, one run each", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_schedule")
      .input(z.object({ schedule: z.string(), at: z.string() }))
      .phase("p", ({ input }) => ({ at: input.at }))
      .respond(({ state }) => ({ status: 200, body: state }));
    await engine.schedule("pglite-yearly", { cron: "0 0 1 1 *", workflow: wf, tenantId: T, catchUp: "all" });
    await sql`UPDATE idempo.schedules SET next_tick_at = '2024-01-01T00:00:00Z' WHERE name = 'pglite-yearly'`.execute(
      db,
    );
    const worker = engine.startWorker({ workflows: [wf], intervalMs: 100, sweep: false });
    try {
      const years = ["2024", "2025", "2026"];
      const keys = years.map((y) => `schedule:pglite-yearly:${y}-01-01T00:00:00.000Z`);
      const done = async () => (await Promise.all(keys.map((k) => engine.inspect(T, k)))).map((r) => r?.status);
      await expect.poll(done, { timeout: 120_000 }).toEqual(["completed", "completed", "completed"]);
      for (const [i, y] of years.entries()) {
        expect((await engine.inspect(T, keys[i] as string))?.response?.body).toEqual({
          at: `${y}-01-01T00:00:00.000Z`,
        });
      }
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs WHERE key LIKE 'schedule:pglite-yearly:%'`.execute(db);
      expect(rows[0]?.n).toBe(3);
    } finally {
      await worker.stop();
    }
  });

  it("a parallel item's branches overlap on the one connection; a crash after one recorded calls only the other again", async () => {
    const engine = createEngine({ db, leaseMs: 30_000 });
    let aCalls = 0;
    let bCalls = 0;
    let bothIn!: () => void;
    const met = new Promise<void>((r) => {
      bothIn = r;
    });
    let inside = 0;
    const meet = async () => {
      if (++inside === 2) bothIn();
      await met;
    };
    const wf = workflow("pglite_parallel")
      .parallel("fan", (p) =>
        p
          .step("a", async () => {
            aCalls++;
            if (aCalls === 1) await meet();
            return { a: aCalls };
          })
          .step("b", async () => {
            bCalls++;
            if (bCalls === 1) await meet();
            return { b: bCalls };
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    let aRecorded!: () => void;
    const recordedA = new Promise<void>((r) => {
      aRecorded = r;
    });
    setFaultHook(engine, async (point) => {
      if (point === "after:branch:fan/a") aRecorded();
      if (point !== "called:branch:fan/b") return;
      await recordedA;
      throw new CrashSignal(point);
    });
    await expect(engine.runOnce(wf, { tenantId: T, key: "par-1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    setFaultHook(engine, undefined);
    await engine.release(T, "par-1");
    const res = await engine.runOnce(wf, { tenantId: T, key: "par-1", input: {} });
    expect(res.body).toEqual({ a: { a: 1 }, b: { b: 2 } });
    expect([aCalls, bCalls]).toEqual([1, 2]);
  });
});
