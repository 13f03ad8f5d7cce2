import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 20 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function orders(retentionMs: number, counter: { runs: number }, delayMs = 0, tombstoneMs?: number) {
  return workflow("retained_checkout", { retentionMs, ...(tombstoneMs === undefined ? {} : { tombstoneMs }) })
    .input(z.object({ cartId: z.string() }))
    .phase("create_order", async ({ tx, input, tenantId }) => {
      counter.runs++;
      if (delayMs) await sleep(delayMs);
      const id = `o_${tenantId}_${counter.runs}`;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${id}, ${tenantId}, ${input.cartId}, 1)`.execute(
        tx,
      );
      return { orderId: id };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
}

async function count(table: "runs" | "run_history", tenantId: string): Promise<number> {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM ${sql.id("idempo", table)} WHERE tenant_id = ${tenantId}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

describe("retention", () => {
  it("a replay within retention is verbatim and never reads business tables", async () => {
    const counter = { runs: 0 };
    const wf = orders(60_000, counter);
    const engine = createEngine({ db: t.db });
    const first = await engine.runOnce(wf, { tenantId: "r1", key: "k1", input: { cartId: "c" } });
    await sql`DELETE FROM orders WHERE tenant_id = 'r1'`.execute(t.db);
    const again = await engine.runOnce(wf, { tenantId: "r1", key: "k1", input: { cartId: "c" } });
    expect(again).toEqual({ ...first, replayed: true });
    expect(counter.runs).toBe(1);
  });

  // With a tombstone (the default) the key is refused past retention: fault-retry-after-retention.test.ts.
  it("without a tombstone an expired record counts as absent before the sweeper runs, and ten callers execute it once", async () => {
    const counter = { runs: 0 };
    const wf = orders(500, counter, 100, 0);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "r2", key: "k1", input: { cartId: "c" } });
    await sleep(600);
    expect((await engine.inspect("r2", "k1"))?.expired).toBe(true);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () =>
        createEngine({ db: t.db }).runOnce(wf, { tenantId: "r2", key: "k1", input: { cartId: "c" } }),
      ),
    );
    const fresh = results.filter((r) => r.status === "fulfilled" && !r.value.replayed);
    expect(fresh).toHaveLength(1);
    for (const r of results) {
      if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "key_in_progress" });
    }
    expect(counter.runs).toBe(2);
    const rec = await engine.inspect("r2", "k1");
    expect(rec).toMatchObject({ status: "completed", attempt: 1, expired: false });
    expect(rec?.history).toHaveLength(1); // the old run's history went with it
  });

  it("without a tombstone an expired key may be reused with a different payload (it is a new intent)", async () => {
    const counter = { runs: 0 };
    const wf = orders(300, counter, 0, 0);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: "r3", key: "k1", input: { cartId: "c1" } });
    await sleep(400);
    const res = await engine.runOnce(wf, { tenantId: "r3", key: "k1", input: { cartId: "c2" } });
    expect(res.replayed).toBe(false);
    expect(counter.runs).toBe(2);
  });
});

describe("sweep", () => {
  it("deletes expired completed records in bounded batches and keeps in-flight and stuck ones", async () => {
    const counter = { runs: 0 };
    const short = orders(200, counter);
    const engine = createEngine({ db: t.db, leaseMs: 200 });
    for (let i = 0; i < 25; i++)
      await engine.runOnce(short, { tenantId: "sw", key: `done${i}`, input: { cartId: "c" } });
    // A stuck run (crashed, lease expired) and a live one, both older than retention.
    setFaultHook(engine, (p, run) => {
      if (p === "before:phase:create_order" && run.key === "stuck") throw new CrashSignal(p);
    });
    await expect(engine.runOnce(short, { tenantId: "sw", key: "stuck", input: { cartId: "c" } })).rejects.toThrow();
    setFaultHook(engine, undefined);
    // The live run waits in its step until the sweeps are done, with a lease of its own
    // long enough that no slow heartbeat can make it look stuck.
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    const live = workflow("live", { retentionMs: 200, leaseMs: 30_000 })
      .step("slow", () => finished.then(() => ({})))
      .respond(() => ({ status: 200, body: {} }));
    const running = engine.runOnce(live, { tenantId: "sw", key: "live", input: {} });
    // Past the retention of the finished runs and the lease of the stuck one (a lower bound: time only grows).
    await sleep(400);
    expect(await engine.sweep({ batchSize: 10, maxBatches: 2 })).toBe(20);
    // Other tests' expired records in this database are swept too.
    expect(await engine.sweep({ batchSize: 10 })).toBeGreaterThanOrEqual(5);
    expect(await count("runs", "sw")).toBe(2);
    expect((await engine.listKeys({ tenantId: "sw", stuck: true })).items.map((r) => r.key)).toEqual(["stuck"]);
    finish();
    expect((await running).status).toBe(200);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.run_history h
      WHERE h.tenant_id = 'sw' AND NOT EXISTS (SELECT 1 FROM idempo.runs r WHERE r.tenant_id = h.tenant_id AND r.key = h.key)
    `.execute(t.db);
    expect(rows[0]?.n).toBe(0);
  });
});
