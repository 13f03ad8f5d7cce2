import { CamelCasePlugin, Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

// An application's Kysely often carries plugins (CamelCasePlugin renames the
// columns of every row it returns). They are for the application's rows: the
// engine reads its own columns by their SQL names, and a phase's `tx` keeps
// the application's plugins for the workflow's own queries.
const t = useTestDatabase();
let db: Kysely<unknown>;
beforeAll(() => {
  const pool = new pg.Pool({ connectionString: t.url, max: 4 });
  pool.on("error", () => undefined);
  db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] });
});
afterAll(() => db.destroy());

const seenInPhase: unknown[] = [];
const order = workflow("plugin_order")
  .phase("create", async ({ tx, key, tenantId }) => {
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 5)`.execute(
      tx,
    );
    const { rows } = await sql<{ cartId: string }>`SELECT cart_id FROM orders WHERE id = ${key}`.execute(tx);
    seenInPhase.push(rows[0]);
    return { orderId: key };
  })
  .step("charge", ({ state }) => ({ chargeId: `ch_${state.orderId}` }))
  .respond(({ state }) => ({ status: 201, body: { chargeId: state.chargeId } }));

describe("an application Kysely with CamelCasePlugin", () => {
  it("runs, replays and inspects a key as on a plain Kysely; the phase's tx keeps the plugin", async () => {
    const engine = createEngine({ db });
    const first = await engine.runOnce(order, { tenantId: "pl", key: "o1", input: { n: 1 } });
    expect(first).toMatchObject({ status: 201, replayed: false, body: { chargeId: "ch_o1" } });
    const again = await engine.runOnce(order, { tenantId: "pl", key: "o1", input: { n: 1 } });
    expect(again).toMatchObject({ status: 201, replayed: true, body: { chargeId: "ch_o1" } });
    expect(seenInPhase).toEqual([{ cartId: "c" }]);
    const record = await engine.inspect("pl", "o1");
    expect(record).toMatchObject({ status: "completed", workflow: "plugin_order", recoveryPoint: "charge" });
    const listed = await engine.listKeys({ tenantId: "pl" });
    expect(listed.items.map((r) => r.key)).toContain("o1");
  });

  it("enqueues inside the application's transaction and a worker runs the run once", async () => {
    const engine = createEngine({ db, workflows: [order] });
    await db.transaction().execute(async (tx) => {
      expect(await engine.enqueue(tx, order, { tenantId: "pl", key: "bg1", input: { n: 2 } })).toEqual({
        created: true,
      });
    });
    const worker = engine.startWorker({ workflows: [order], sweep: false, intervalMs: 20 });
    try {
      const done = await engine.wait("pl", "bg1", { timeoutMs: 120_000 });
      expect(done).toMatchObject({ status: 201, body: { chargeId: "ch_bg1" } });
    } finally {
      await worker.stop();
    }
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE id = 'bg1'`.execute(t.db);
    expect(rows[0]?.n).toBe(1);
  });
});
