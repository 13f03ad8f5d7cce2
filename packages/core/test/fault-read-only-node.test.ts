/**
 * Fault kind "read-only node": during a failover the front may route a
 * connection to a node that cannot take writes yet (Patroni reports the new
 * leader as primary a moment before its promotion finished, or a demoted
 * primary still answers), or to no server at all for a moment. PostgreSQL
 * refuses the write with 25006 (read_only_sql_transaction); a connect
 * fails or times out. Either way nothing ran, so the engine sends the work
 * again in place, bounded by `unavailableRetryMs`: the claim and the
 * engine's other calls outside a transaction, and a phase's transaction
 * from its start. Past the bound the caller gets DatabaseUnavailableError
 * (503, retry the same key), and under `onUnknownError: 'store'` a refusal
 * never becomes the run's stored answer.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, expect, it } from "vitest";
import { createEngine, DatabaseUnavailableError, workflow } from "../src/index.ts";
import { setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";
const pools: pg.Pool[] = [];

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
});

function openPool(options: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: t.url, max: 2, ...options });
  pool.on("error", () => undefined);
  pools.push(pool);
  return pool;
}

/** A pool whose every session is read-only, as on a standby. */
const readOnlyPool = () => openPool({ options: "-c default_transaction_read_only=on" });

/** A database whose first `readOnly` connections reach a standby, and the later ones the new primary. */
function failingOverDb(readOnly: number) {
  const standby = readOnlyPool();
  const primary = openPool();
  let handed = 0;
  const pool = { connect: () => (handed++ < readOnly ? standby : primary).connect(), end: async () => undefined };
  return new Kysely({ dialect: new PostgresDialect({ pool }) });
}

const ran = new Map<string, number>();

function orderWorkflow(name: string, readOnlyTries: { left: number }) {
  return workflow(name, { onUnknownError: "store" })
    .phase("order", async ({ tx, key, tenantId }) => {
      ran.set(key, (ran.get(key) ?? 0) + 1);
      // The phase's connection reaches a node that is not writable yet.
      if (readOnlyTries.left-- > 0) await sql`SET TRANSACTION READ ONLY`.execute(tx);
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
                VALUES (${`o-${key}`}, ${tenantId}, ${key}, 100)`.execute(tx);
      return { orderId: `o-${key}` };
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));
}

async function ordersOf(key: string): Promise<number> {
  const res = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE cart_id = ${key}`.execute(t.db);
  return res.rows[0]?.n ?? -1;
}

it("a claim refused by a standby is sent again until the primary answers, and the run completes in that call", async () => {
  const wf = orderWorkflow("read_only_claim_retried", { left: 0 });
  const res = await createEngine({ db: failingOverDb(3) }).runOnce(wf, { tenantId: T, key: "k0", input: {} });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k0" }, replayed: false });
  expect(await ordersOf("k0")).toBe(1);
});

it("past unavailableRetryMs a refused claim is DatabaseUnavailableError, in doubt about nothing; the key then runs once", async () => {
  const wf = orderWorkflow("read_only_claim", { left: 0 });
  const db = new Kysely({ dialect: new PostgresDialect({ pool: readOnlyPool() }) });
  const err = await createEngine({ db, unavailableRetryMs: 300 })
    .runOnce(wf, { tenantId: T, key: "k1", input: {} })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DatabaseUnavailableError);
  expect((err as DatabaseUnavailableError).httpStatus).toBe(503);
  expect((err as DatabaseUnavailableError).inDoubt).toBeUndefined();
  expect(((err as Error).cause as { code?: string }).code).toBe("25006");

  const res = await createEngine({ db: t.db }).runOnce(wf, { tenantId: T, key: "k1", input: {} });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k1" }, replayed: false });
  expect(await ordersOf("k1")).toBe(1);
});

it("a phase refused by a read-only node runs again in place and commits once", async () => {
  const wf = orderWorkflow("read_only_phase_retried", { left: 2 });
  const res = await createEngine({ db: t.db }).runOnce(wf, { tenantId: T, key: "k3", input: {} });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k3" }, replayed: false });
  expect(ran.get("k3")).toBe(3);
  expect(await ordersOf("k3")).toBe(1);
});

it("with unavailableRetryMs 0, a refused phase is DatabaseUnavailableError at once and never the stored answer under onUnknownError 'store'", async () => {
  const wf = orderWorkflow("read_only_phase", { left: 1 });
  const engine = createEngine({ db: t.db, leaseMs: 500, unavailableRetryMs: 0 });
  const err = await engine.runOnce(wf, { tenantId: T, key: "k2", input: {} }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DatabaseUnavailableError);
  const rec = await engine.inspect(T, "k2");
  expect(rec?.status).toBe("in_flight");
  expect(await ordersOf("k2")).toBe(0);

  // The retry takes the run over once its lease ran out, and completes it once.
  const res = await engine.runOnce(wf, { tenantId: T, key: "k2", input: {}, waitInFlightMs: 30_000 });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k2" } });
  expect(await ordersOf("k2")).toBe(1);
});

it("a phase that gets no connection for a while (connect timeout) runs once one is free; the timeout is never its answer", async () => {
  // Two connections, both held by someone else while the phase wants one: pg-pool times the wait out.
  const pool = openPool({ max: 2, connectionTimeoutMillis: 100 });
  const engine = createEngine({ db: new Kysely({ dialect: new PostgresDialect({ pool }) }) });
  const wf = orderWorkflow("no_connection_phase", { left: 0 });
  let held: pg.PoolClient[] = [];
  setFaultHook(engine, async (point) => {
    if (point !== "before:phase:order" || held.length > 0) return;
    held = [await pool.connect(), await pool.connect()];
    setTimeout(() => {
      for (const c of held) c.release();
    }, 500);
  });
  const res = await engine.runOnce(wf, { tenantId: T, key: "k4", input: {} });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k4" }, replayed: false });
  expect(held).toHaveLength(2);
  expect(await ordersOf("k4")).toBe(1);
});
