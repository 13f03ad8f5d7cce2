import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import { createEngine, DatabaseUnavailableError, WorkflowDefinitionError, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor, waitForLeaseExpiry, waitPastCurrentLease } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase({ pool: 20 });
const input = { cartId: "c1", amountCents: 500 };

async function ordersFor(tenantId: string): Promise<number> {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

/** Crash an attempt at `point`, leaving the key in flight. */
async function crashAt(engine: Engine, point: string, run: () => Promise<unknown>): Promise<void> {
  setFaultHook(engine, (p) => {
    if (p === point) throw new CrashSignal(p);
  });
  await expect(run()).rejects.toBeInstanceOf(CrashSignal);
  setFaultHook(engine, undefined);
}

describe("lease renewal keeps long work owned", () => {
  it("a step that outlives its lease three times over is never taken over and runs once", async () => {
    let calls = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let started!: () => void;
    const inStep = new Promise<void>((r) => {
      started = r;
    });
    const slow = workflow("slow_report")
      .step("slow_report", async ({ signal }) => {
        calls++;
        started();
        await released;
        return { aborted: signal.aborted };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    // Default heartbeat: a third of the lease, so a renewal has two intervals of slack on a busy machine.
    const a = createEngine({ db: t.db, leaseMs: 6000 });
    const b = createEngine({ db: t.connect(4), leaseMs: 6000 });
    const running = a.runOnce(slow, { tenantId: "lr", key: "k1", input: {} });
    await inStep;
    for (let i = 0; i < 3; i++) {
      // Past the lease the run held a moment ago: only a renewal can have kept it.
      await waitPastCurrentLease(t.db, "lr", "k1");
      await expect(b.runOnce(slow, { tenantId: "lr", key: "k1", input: {} })).rejects.toMatchObject({
        code: "key_in_progress",
      });
      const stuck = await b.listKeys({ tenantId: "lr", stuck: true });
      expect(stuck.items).toHaveLength(0);
      const rec = await b.inspect("lr", "k1");
      expect(rec?.leaseRemainingMs).toBeGreaterThan(0);
    }
    release();
    const res = await running;
    expect(res).toMatchObject({ status: 201, replayed: false, body: { aborted: false } });
    expect(calls).toBe(1);
    expect((await b.runOnce(slow, { tenantId: "lr", key: "k1", input: {} })).replayed).toBe(true);
  });
});

describe("abandoned runs are finished by resumeStale", () => {
  it("finishes a crashed checkout from its recovery point with the stored input", async () => {
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments);
    // Long enough that the lease is surely still valid at the first resumeStale, however slow the machine.
    const engine = createEngine({ db: t.db, leaseMs: 3000 });
    await crashAt(engine, "called:step:charge", () => engine.runOnce(checkout, { tenantId: "rs", key: "k1", input }));
    expect((await engine.resumeStale({ workflows: [checkout] })).resumed).toHaveLength(0); // lease still valid
    await waitForLeaseExpiry(engine, "rs", "k1", 30_000);
    const report = await engine.resumeStale({ workflows: [checkout] });
    expect(report.resumed).toEqual([
      { tenantId: "rs", key: "k1", workflow: "checkout", status: 201, outcome: "succeeded" },
    ]);
    expect(counters).toEqual({ create_order: 1, charge: 2, record_charge: 1 });
    expect(payments.charges).toBe(1);
    expect(new Set(payments.calls.map((c) => c.key)).size).toBe(1);
    expect(await ordersFor("rs")).toBe(1);
    const replay = await engine.runOnce(checkout, { tenantId: "rs", key: "k1", input });
    expect(replay.replayed).toBe(true);
  });

  it("ten concurrent resumers and clients on one stale key produce one takeover", async () => {
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "after:phase:create_order", () =>
      engine.runOnce(checkout, { tenantId: "rs10", key: "k1", input }),
    );
    await waitForLeaseExpiry(engine, "rs10", "k1", 30_000);
    // The winner's own lease must outlast the race however slow the machine: one takeover, attempt 2.
    const engines = Array.from({ length: 10 }, () => createEngine({ db: t.connect(2), leaseMs: 30_000 }));
    const results = await Promise.allSettled(
      engines.map((e, i) =>
        i % 2 === 0
          ? e.resumeStale({ workflows: [checkout] })
          : e.runOnce(checkout, { tenantId: "rs10", key: "k1", input }),
      ),
    );
    const rec = await engine.inspect("rs10", "k1");
    expect(rec?.status).toBe("completed");
    expect(rec?.attempt).toBe(2);
    expect(counters.create_order).toBe(1);
    expect(counters.charge).toBe(1);
    expect(counters.record_charge).toBe(1);
    for (const r of results) {
      if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "key_in_progress" });
    }
  });

  it("a worker finishes abandoned runs in the background and stops cleanly", async () => {
    const payments = new FakePayments();
    const { workflow: checkout } = makeCheckout(payments);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "after:step:charge", () => engine.runOnce(checkout, { tenantId: "wk", key: "k1", input }));
    const worker = engine.startWorker({ workflows: [checkout], intervalMs: 100 });
    await waitFor(async () => ((await engine.inspect("wk", "k1"))?.status === "completed" ? true : undefined), 30_000);
    await worker.stop();
    expect((await engine.inspect("wk", "k1"))?.status).toBe("completed");
    expect(payments.charges).toBe(1);
  });
});

describe("in-doubt steps", () => {
  const reconciling = (payments: FakePayments, counters: { reconcile: number; charge: number }) =>
    workflow("reconciled_checkout")
      .input(z.object({ amountCents: z.number() }))
      .step(
        "charge",
        ({ input, idempotencyKey }) => {
          counters.charge++;
          return { chargeId: payments.charge({ orderId: "o", amountCents: input.amountCents }, idempotencyKey).id };
        },
        {
          reconcile: ({ idempotencyKey }) => {
            counters.reconcile++;
            const chargeId = payments.lookup(idempotencyKey);
            return chargeId ? { chargeId } : undefined;
          },
        },
      )
      .respond(({ state }) => ({ status: 201, body: state }));

  it("a started-but-unrecorded step is reconciled instead of called again", async () => {
    const payments = new FakePayments();
    const counters = { reconcile: 0, charge: 0 };
    const wf = reconciling(payments, counters);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "called:step:charge", () =>
      engine.runOnce(wf, { tenantId: "rc", key: "k1", input: { amountCents: 5 } }),
    );
    await engine.release("rc", "k1");
    const res = await engine.runOnce(wf, { tenantId: "rc", key: "k1", input: { amountCents: 5 } });
    expect(res).toMatchObject({ status: 201, body: { chargeId: "ch_1" } });
    expect(counters).toEqual({ reconcile: 1, charge: 1 });
    expect(payments.calls).toHaveLength(1);
    const rec = await engine.inspect("rc", "k1");
    expect(rec?.history?.map((h) => h.outcome)).toEqual(["interrupted", "reconciled"]);
  });

  it("when reconcile finds nothing, the step is called again with the same derived key", async () => {
    const payments = new FakePayments();
    const counters = { reconcile: 0, charge: 0 };
    const wf = reconciling(payments, counters);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "before:step:charge", () =>
      engine.runOnce(wf, { tenantId: "rc", key: "k2", input: { amountCents: 5 } }),
    );
    await engine.release("rc", "k2");
    await engine.runOnce(wf, { tenantId: "rc", key: "k2", input: { amountCents: 5 } });
    expect(counters).toEqual({ reconcile: 1, charge: 1 });
    expect(payments.charges).toBe(1);
  });
});

describe("transient database errors", () => {
  it("a serialization failure in a phase is retried and the phase commits once", async () => {
    let tries = 0;
    const wf = workflow("serial")
      .phase("write", async ({ tx }) => {
        tries++;
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`ser${tries}`}, 'ser', 'c', 1)`.execute(
          tx,
        );
        if (tries < 3) throw Object.assign(new Error("could not serialize access"), { code: "40001" });
        return { tries };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const engine = createEngine({ db: t.db });
    const res = await engine.runOnce(wf, { tenantId: "ser", key: "k1", input: {} });
    expect(res.body).toEqual({ tries: 3 });
    expect(await ordersFor("ser")).toBe(1);
  });

  it("a connection terminated mid-phase leaves the run resumable and surfaces as DatabaseUnavailableError", async () => {
    const payments = new FakePayments();
    let kill = true;
    const wf = workflow("terminated")
      .phase("create", async ({ tx }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('term1', 'term', 'c', 1)`.execute(
          tx,
        );
        if (kill) {
          kill = false;
          await sql`SELECT pg_terminate_backend(pg_backend_pid())`.execute(tx);
        }
        return { orderId: "term1" };
      })
      .step("charge", ({ idempotencyKey }) => ({
        chargeId: payments.charge({ orderId: "term1", amountCents: 1 }, idempotencyKey).id,
      }))
      .respond(({ state }) => ({ status: 201, body: state }));
    // A terminated backend makes pg emit 'error' on the client after the query failed; an
    // application must listen for it (pg's documented pool hygiene), and so does this test.
    const pool = new pg.Pool({ connectionString: t.url, max: 2 });
    pool.on("connect", (client) => client.on("error", () => {}));
    const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    onTestFinished(() => db.destroy());
    const engine = createEngine({ db, leaseMs: 300 });
    await expect(engine.runOnce(wf, { tenantId: "term", key: "k1", input: {} })).rejects.toBeInstanceOf(
      DatabaseUnavailableError,
    );
    expect(await ordersFor("term")).toBe(0);
    const rec = await engine.inspect("term", "k1");
    expect(rec).toMatchObject({ status: "in_flight", recoveryPoint: null });
    await engine.release("term", "k1");
    const res = await engine.runOnce(wf, { tenantId: "term", key: "k1", input: {} });
    expect(res.status).toBe(201);
    expect(await ordersFor("term")).toBe(1);
    expect(payments.charges).toBe(1);
  });
});

describe("definition changes", () => {
  it("a renamed step fails with WorkflowDefinitionError and no extra provider call", async () => {
    const payments = new FakePayments();
    const { workflow: v1 } = makeCheckout(payments);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "after:phase:create_order", () => engine.runOnce(v1, { tenantId: "dc", key: "k1", input }));
    const v2 = workflow("checkout")
      .input(z.object({ cartId: z.string(), amountCents: z.number() }))
      .phase("create_order", () => ({ orderId: "x" }))
      .step("pay", ({ idempotencyKey }) => ({
        chargeId: payments.charge({ orderId: "x", amountCents: 1 }, idempotencyKey).id,
      }))
      .phase("record_charge", () => ({}))
      .respond(() => ({ status: 201, body: {} }));
    await engine.release("dc", "k1");
    const error = await engine.runOnce(v2, { tenantId: "dc", key: "k1", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(String((error as Error).message)).toMatch(/create_order.*step:charge.*step:pay/s);
    expect(payments.calls).toHaveLength(0);
    // The old definition can still finish the run.
    await engine.release("dc", "k1");
    expect((await engine.runOnce(v1, { tenantId: "dc", key: "k1", input })).status).toBe(201);
  });

  it("a step added before the recovery point does not block resuming", async () => {
    const { workflow: v1 } = makeCheckout(new FakePayments());
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    await crashAt(engine, "after:step:charge", () => engine.runOnce(v1, { tenantId: "dc", key: "k2", input }));
    const v2 = workflow("checkout")
      .input(z.object({ cartId: z.string(), amountCents: z.number() }))
      .phase("audit", () => ({}))
      .phase("create_order", () => ({ orderId: "x" }))
      .step("charge", () => ({ chargeId: "never" }))
      .phase("record_charge", () => ({}))
      .respond(({ state }) => ({ status: 201, body: state }));
    await engine.release("dc", "k2");
    const res = await engine.runOnce(v2, { tenantId: "dc", key: "k2", input });
    expect(res.status).toBe(201);
    expect((res.body as { chargeId: string }).chargeId).toBe("ch_1");
  });
});

describe("error policy", () => {
  it("onUnknownError 'store' completes with a 500 problem body that replays byte for byte", async () => {
    let calls = 0;
    const wf = workflow("stored_errors", { onUnknownError: "store" })
      .phase("boom", () => {
        calls++;
        throw new Error("secret detail");
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    const first = await engine.runOnce(wf, { tenantId: "ep", key: "k1", input: {} });
    expect(first).toMatchObject({ status: 500, outcome: "errored", replayed: false });
    expect(JSON.stringify(first.body)).not.toContain("secret");
    const again = await engine.runOnce(wf, { tenantId: "ep", key: "k1", input: {} });
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(again.replayed).toBe(true);
    expect(calls).toBe(1);
    const rec = await engine.inspect("ep", "k1");
    expect(rec?.history?.[0]).toMatchObject({ name: "boom", outcome: "failed", error: "secret detail" });
  });

  it("the default policy leaves the run in flight and rethrows", async () => {
    const wf = workflow("retry_errors")
      .phase("boom", () => {
        throw new Error("transient");
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db, leaseMs: 5000 });
    await expect(engine.runOnce(wf, { tenantId: "ep", key: "k2", input: {} })).rejects.toThrow("transient");
    await expect(engine.runOnce(wf, { tenantId: "ep", key: "k2", input: {} })).rejects.toMatchObject({
      code: "key_in_progress",
    });
  });
});
