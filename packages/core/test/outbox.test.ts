import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { DeliveryHandler, Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 12 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface OutboxRow {
  topic: string;
  status: string;
  attempts: number;
  delivery_key: string;
  last_error: string | null;
}

async function outboxRows(tenantId: string): Promise<OutboxRow[]> {
  const { rows } = await sql<OutboxRow>`
    SELECT topic, status, attempts, delivery_key, last_error FROM idempo.outbox WHERE tenant_id = ${tenantId} ORDER BY message_id
  `.execute(t.db);
  return rows;
}

/** Checkout-like workflow whose last phase but one sends a receipt through the outbox. */
function receipts(counter: { record: number }) {
  return workflow("receipts")
    .input(z.object({ orderId: z.string() }))
    .phase("record_charge", async ({ input, outbox }) => {
      counter.record++;
      await outbox.enqueue("receipt.email", { orderId: input.orderId });
      return {};
    })
    .phase("finish", () => ({ done: true }))
    .respond(({ input }) => ({ status: 201, body: { orderId: input.orderId } }));
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await sleep(20);
  }
}

function relayOf(engine: Engine, handler: DeliveryHandler, extra: Record<string, unknown> = {}) {
  const relay = engine.startRelay({ handlers: { "receipt.email": handler }, pollIntervalMs: 50, ...extra });
  onTestFinished(() => relay.stop());
  return relay;
}

describe("outbox writes commit with their phase", () => {
  it("a phase that fails after enqueueing leaves no message", async () => {
    const wf = workflow("rolled_back")
      .phase("p", async ({ outbox }) => {
        await outbox.enqueue("receipt.email", { n: 1 });
        throw new Error("after enqueue");
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    await expect(engine.runOnce(wf, { tenantId: "ob1", key: "k1", input: {} })).rejects.toThrow("after enqueue");
    expect(await outboxRows("ob1")).toEqual([]);
  });

  it("replays and takeovers never enqueue again", async () => {
    const counter = { record: 0 };
    const wf = receipts(counter);
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    setFaultHook(engine, (p) => {
      if (p === "after:phase:record_charge") throw new CrashSignal(p);
    });
    await expect(engine.runOnce(wf, { tenantId: "ob2", key: "k1", input: { orderId: "o1" } })).rejects.toThrow();
    setFaultHook(engine, undefined);
    await engine.release("ob2", "k1");
    for (let i = 0; i < 4; i++) await engine.runOnce(wf, { tenantId: "ob2", key: "k1", input: { orderId: "o1" } });
    expect(counter.record).toBe(1);
    expect(await outboxRows("ob2")).toHaveLength(1);
  });

  it("the same phase re-run after a rollback derives the same delivery key", async () => {
    let tries = 0;
    const keys: string[] = [];
    const wf = workflow("rerun")
      .phase("p", async ({ outbox }) => {
        tries++;
        keys.push(await outbox.enqueue("receipt.email", {}));
        if (tries === 1) throw Object.assign(new Error("deadlock"), { code: "40P01" });
        return {};
      })
      .respond(() => ({ status: 200, body: {} }));
    await createEngine({ db: t.db }).runOnce(wf, { tenantId: "ob3", key: "k1", input: {} });
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
    expect((await outboxRows("ob3")).map((r) => r.delivery_key)).toEqual([keys[0]]);
  });
});

describe("relay", () => {
  it("delivers once per message with its delivery key, and replays do not trigger it", async () => {
    const counter = { record: 0 };
    const wf = receipts(counter);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "rl1", key: "k1", input: { orderId: "o1" } });
    for (let i = 0; i < 3; i++) await engine.runOnce(wf, { tenantId: "rl1", key: "k1", input: { orderId: "o1" } });
    const delivered: { key: string; payload: unknown; attempt: number }[] = [];
    relayOf(engine, (m, ctx) => {
      if (m.tenantId === "rl1") delivered.push({ key: ctx.deliveryKey, payload: m.payload, attempt: ctx.attempt });
    });
    await until(async () => (await outboxRows("rl1"))[0]?.status === "delivered");
    await engine.runOnce(wf, { tenantId: "rl1", key: "k1", input: { orderId: "o1" } });
    await sleep(150);
    expect(delivered).toEqual([
      { key: (await outboxRows("rl1"))[0]?.delivery_key, payload: { orderId: "o1" }, attempt: 1 },
    ]);
  });

  // No clock: the polling interval is far longer than the test may take, so
  // only the NOTIFY can bring the delivery within the deadline.
  it("wakes on NOTIFY well before its polling interval", async () => {
    const listener = new pg.Client({ connectionString: t.url });
    await listener.connect();
    onTestFinished(() => listener.end());
    const engine = createEngine({ db: t.db });
    let delivered = false;
    const relay = engine.startRelay({
      handlers: {
        "receipt.email": (m) => {
          if (m.tenantId === "rl2") delivered = true;
        },
      },
      pollIntervalMs: 60 * 60_000,
      listen: listener,
    });
    onTestFinished(() => relay.stop());
    // The relay listens before its first poll; give that (empty) poll a moment to be over.
    const pid = (listener as unknown as { processID: number }).processID;
    await until(async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid} AND query ILIKE 'LISTEN%'`.execute(t.db);
      return (rows[0]?.n ?? 0) > 0;
    }, 300_000);
    await sleep(200);
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "rl2", key: "k1", input: { orderId: "o2" } });
    await until(() => delivered, 30_000);
  });

  it("a relay killed after the handler succeeded redelivers with the same delivery key", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "rl3", key: "k1", input: { orderId: "o3" } });
    const seen: { key: string; attempt: number }[] = [];
    setFaultHook(engine, (point, run) => {
      if (point === "delivered:outbox:receipt.email" && run.tenantId === "rl3" && run.attempt === 1) {
        throw new CrashSignal(point);
      }
    });
    onTestFinished(() => setFaultHook(engine, undefined));
    relayOf(
      engine,
      (m, ctx) => {
        if (m.tenantId === "rl3") seen.push({ key: ctx.deliveryKey, attempt: ctx.attempt });
      },
      { leaseMs: 300 },
    );
    await until(async () => (await outboxRows("rl3"))[0]?.status === "delivered");
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    expect(new Set(seen.map((s) => s.key)).size).toBe(1);
  });

  it("two relays over 100 messages deliver each once and never concurrently", async () => {
    const wf = workflow("bulk")
      .phase("p", async ({ outbox }) => {
        for (let i = 0; i < 100; i++) await outbox.enqueue("receipt.email", { i });
        return {};
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "rl4", key: "k1", input: {} });
    const inFlight = new Set<string>();
    const deliveries: string[] = [];
    let overlaps = 0;
    const handler: DeliveryHandler = async (m, ctx) => {
      if (m.tenantId !== "rl4") return;
      if (inFlight.has(ctx.deliveryKey)) overlaps++;
      inFlight.add(ctx.deliveryKey);
      await sleep(Math.random() * 5);
      inFlight.delete(ctx.deliveryKey);
      deliveries.push(ctx.deliveryKey);
    };
    relayOf(createEngine({ db: t.connect(3) }), handler, { concurrency: 8 });
    relayOf(createEngine({ db: t.connect(3) }), handler, { concurrency: 8 });
    await until(async () => (await outboxRows("rl4")).every((r) => r.status === "delivered"), 10_000);
    expect(deliveries).toHaveLength(100);
    expect(new Set(deliveries).size).toBe(100);
    expect(overlaps).toBe(0);
  });

  it("dead-letters a message after maxAttempts with its last error", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "rl5", key: "k1", input: { orderId: "o5" } });
    let calls = 0;
    relayOf(
      engine,
      (m) => {
        if (m.tenantId !== "rl5") return;
        calls++;
        throw new Error(`mailer down (${calls})`);
      },
      { maxAttempts: 3, backoffMs: 1, maxBackoffMs: 5 },
    );
    await until(async () => (await outboxRows("rl5"))[0]?.status === "dead");
    expect(calls).toBe(3);
    expect(await outboxRows("rl5")).toMatchObject([{ status: "dead", attempts: 3, last_error: "mailer down (3)" }]);
  });
});

describe("outbox housekeeping", () => {
  it("a repeated explicit delivery key is a clear usage error and nothing of the phase commits", async () => {
    const wf = workflow("dup_delivery")
      .phase("p", async ({ outbox }) => {
        await outbox.enqueue("receipt.email", { n: 1 }, { deliveryKey: "receipt-42" });
        await outbox.enqueue("receipt.email", { n: 2 }, { deliveryKey: "receipt-42" });
        return {};
      })
      .respond(() => ({ status: 200, body: {} }));
    const engine = createEngine({ db: t.db });
    await expect(engine.runOnce(wf, { tenantId: "hk1", key: "k1", input: {} })).rejects.toMatchObject({
      code: "workflow_usage",
    });
    expect(await outboxRows("hk1")).toEqual([]);
  });

  it("sweep deletes delivered messages past their retention and keeps pending and dead ones", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "hk2", key: "k1", input: { orderId: "a" } });
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "hk2", key: "k2", input: { orderId: "b" } });
    await engine.runOnce(receipts({ record: 0 }), { tenantId: "hk2", key: "k3", input: { orderId: "c" } });
    await sql`UPDATE idempo.outbox SET status = 'delivered', delivered_at = now() - interval '1 hour'
              WHERE tenant_id = 'hk2' AND payload->>'orderId' = 'a'`.execute(t.db);
    await sql`UPDATE idempo.outbox SET status = 'dead' WHERE tenant_id = 'hk2' AND payload->>'orderId' = 'b'`.execute(
      t.db,
    );
    await engine.sweep({ outboxRetentionMs: 60_000 });
    expect((await outboxRows("hk2")).map((r) => r.status).sort()).toEqual(["dead", "pending"]);
  });
});
