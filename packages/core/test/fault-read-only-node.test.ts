/**
 * Fault kind "read-only node": during a failover the front may route a
 * connection to a node that cannot take writes yet (Patroni reports the new
 * leader as primary a moment before its promotion finished, or a demoted
 * primary still answers). PostgreSQL refuses the write with 25006
 * (read_only_sql_transaction). That is the database being unavailable for
 * writes, not an error of the workflow: the caller must get
 * DatabaseUnavailableError (503, retry the same key), and under
 * `onUnknownError: 'store'` it must never become the run's stored answer.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, expect, it } from "vitest";
import { createEngine, DatabaseUnavailableError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";
const pools: pg.Pool[] = [];

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
});

/** A pool whose every session is read-only, as on a standby. */
function readOnlyDb() {
  const pool = new pg.Pool({ connectionString: t.url, max: 2, options: "-c default_transaction_read_only=on" });
  pools.push(pool);
  return new Kysely({ dialect: new PostgresDialect({ pool }) });
}

function orderWorkflow(name: string, readOnlyTries: { left: number }) {
  return workflow(name, { onUnknownError: "store" })
    .phase("order", async ({ tx, key, tenantId }) => {
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

it("a claim on a read-only node is DatabaseUnavailableError, and the same key then runs once", async () => {
  const wf = orderWorkflow("read_only_claim", { left: 0 });
  const err = await createEngine({ db: readOnlyDb() })
    .runOnce(wf, { tenantId: T, key: "k1", input: {} })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DatabaseUnavailableError);
  expect((err as DatabaseUnavailableError).httpStatus).toBe(503);
  expect(((err as Error).cause as { code?: string }).code).toBe("25006");

  const res = await createEngine({ db: t.db }).runOnce(wf, { tenantId: T, key: "k1", input: {} });
  expect(res).toMatchObject({ status: 201, body: { orderId: "o-k1" }, replayed: false });
  expect(await ordersOf("k1")).toBe(1);
});

it("a phase refused by a read-only node is never stored as the run's answer, even under onUnknownError 'store'", async () => {
  const wf = orderWorkflow("read_only_phase", { left: 1 });
  const engine = createEngine({ db: t.db, leaseMs: 500 });
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
