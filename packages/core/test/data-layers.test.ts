import { PGlite } from "@electric-sql/pglite";
import { count, sql as drizzleSql, eq } from "drizzle-orm";
import { drizzle as drizzleNodePostgres } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { DataLayer, Engine, TxOf, WithTx } from "../src/index.ts";
import { createEngine, fromDrizzle, fromNodePostgres, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

// The same workflow, phase and step and phase, on every data layer: the
// phase's writes with the layer's own transaction object commit with the
// engine's record, a crash after the write leaves neither, a caller's
// transaction holds an enqueue and a signal, and the engine's fixed
// statements are prepared where the driver prepares them.
const t = useTestDatabase();
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const orders = pgTable("orders", {
  id: text("id").primaryKey(),
  tenantId: text("tenant_id").notNull(),
  cartId: text("cart_id").notNull(),
  amountCents: integer("amount_cents").notNull(),
});
const schema = { orders };

function pool(max = 4): pg.Pool {
  const p = new pg.Pool({ connectionString: t.url, max });
  p.on("error", () => undefined);
  closers.push(() => p.end());
  return p;
}

/** One data layer under test: its engine, a phase's write with its `tx`, a transaction of the caller's, the orders' count. */
interface Layer<Tx> {
  readonly data: DataLayer<Tx>;
  insert(tx: Tx, id: string, tenantId: string): Promise<unknown>;
  /** A statement on `tx` that fails with SQLSTATE `code`, thrown as the layer throws it. */
  raise(tx: Tx, code: string): Promise<unknown>;
  callerTransaction<T>(body: (tx: Tx) => Promise<T>): Promise<T>;
  count(tenantId: string): Promise<number>;
  /** The engine's statements prepared on the session `body` ran its engine calls on, or null where none are. */
  prepared?: () => Promise<string[]>;
}

/** A statement that fails with SQLSTATE `code`. */
const raising = (code: string) => `DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '${code}'; END $$`;

function makeDb() {
  return drizzleNodePostgres(pool(2), { schema });
}
/** What `workflow<TxOf<typeof data>>` gives a phase: Drizzle's transaction with the schema. */
type DrizzlePoolTx =
  TxOf<ReturnType<typeof fromDrizzle<ReturnType<typeof makeDb>>>> extends WithTx<infer T> ? T : never;

function drizzleOnPool(): Layer<DrizzlePoolTx> {
  const db = makeDb();
  return {
    data: fromDrizzle(db),
    insert: (tx, id, tenantId) => tx.insert(orders).values({ id, tenantId, cartId: "c", amountCents: 1 }),
    raise: (tx, code) => tx.execute(drizzleSql.raw(raising(code))),
    callerTransaction: (body) => db.transaction(body),
    count: async (tenantId) =>
      (await db.select({ n: count() }).from(orders).where(eq(orders.tenantId, tenantId)))[0]?.n ?? -1,
  };
}
function nodePostgres(): Layer<pg.PoolClient> {
  const p = pool(4);
  return {
    data: fromNodePostgres(p),
    insert: (tx, id, tenantId) =>
      tx.query("INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ($1, $2, 'c', 1)", [id, tenantId]),
    raise: (tx, code) => tx.query(raising(code)),
    callerTransaction: async (body) => {
      const client = await p.connect();
      try {
        await client.query("BEGIN");
        const result = await body(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK");
        throw error;
      } finally {
        client.release();
      }
    },
    count: async (tenantId) =>
      (await p.query<{ n: number }>("SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1", [tenantId])).rows[0]
        ?.n ?? -1,
  };
}

async function drizzleOnPglite() {
  const pglite = await PGlite.create();
  closers.push(() => pglite.close());
  await pglite.exec(
    "CREATE TABLE orders (id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL, amount_cents int NOT NULL)",
  );
  const db = drizzlePglite(pglite, { schema });
  const layer: Layer<Parameters<Parameters<typeof db.transaction>[0]>[0]> = {
    data: fromDrizzle(db),
    insert: (tx, id, tenantId) => tx.insert(orders).values({ id, tenantId, cartId: "c", amountCents: 1 }),
    raise: (tx, code) => tx.execute(drizzleSql.raw(raising(code))),
    callerTransaction: (body) => db.transaction(body),
    count: async (tenantId) =>
      (await db.select({ n: count() }).from(orders).where(eq(orders.tenantId, tenantId)))[0]?.n ?? -1,
  };
  return layer;
}

/** The checks every data layer passes, with its own `tx` type. */
function checks<Tx>(name: string, make: () => Promise<Layer<Tx>> | Layer<Tx>, pglite = false) {
  describe(name, () => {
    let layer: Layer<Tx>;
    let engine: Engine;
    const tenant = name.replace(/\W+/g, "_");
    let crashInPhase = false;
    const flow = workflow<WithTx<Tx>>(`layers_${tenant}`)
      .phase("order", async ({ tx, key, tenantId, outbox }) => {
        await layer.insert(tx, `${tenantId}:${key}`, tenantId);
        // The engine's own statement in the phase: it must commit or vanish with the phase's write.
        await outbox.enqueue("order.placed", { key });
        // The process dies after the write, before the commit: the write must vanish with the transaction.
        if (crashInPhase) throw new CrashSignal("in:phase:order");
        return { orderId: `${tenantId}:${key}` };
      })
      .step("charge", ({ idempotencyKey }) => ({ charge: idempotencyKey.slice(0, 8) }))
      .phase("receipt", () => ({ receipt: true }))
      .respond(({ state }) => ({ status: 201, body: state }));
    const waiter = workflow<WithTx<Tx>>(`layers_wait_${tenant}`)
      .waitFor("approved")
      .respond(({ state }) => ({ status: 200, body: state }));

    it("runs a phase with the data layer's own transaction, and replays", async () => {
      layer = await make();
      engine = createEngine({ db: layer.data as DataLayer, leaseMs: 1_000 });
      if (pglite) await engine.migrate();
      const first = await engine.runOnce(flow, { tenantId: tenant, key: "k1", input: {} });
      expect(first).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
      expect(await engine.runOnce(flow, { tenantId: tenant, key: "k1", input: {} })).toMatchObject({
        status: 201,
        replayed: true,
        body: first.body,
      });
      expect(await layer.count(tenant)).toBe(1);
    });

    it("a crash after the phase's write, or after its commit: the retry writes the order once", async () => {
      crashInPhase = true;
      await expect(engine.runOnce(flow, { tenantId: tenant, key: "k2", input: {} })).rejects.toBeInstanceOf(
        CrashSignal,
      );
      crashInPhase = false;
      expect(await layer.count(tenant)).toBe(1);
      const messages = async () => (await engine.listOutbox({ tenantId: tenant })).length;
      expect(await messages()).toBe(1);
      const record = await engine.inspect(tenant, "k2");
      expect(record && "recoveryPoint" in record ? record.recoveryPoint : "absent").toBeNull();
      // The crashed attempt's lease runs out; the retry takes over and writes the order once.
      await new Promise((r) => setTimeout(r, 1_100));
      expect((await engine.runOnce(flow, { tenantId: tenant, key: "k2", input: {} })).status).toBe(201);
      expect(await layer.count(tenant)).toBe(2);
      expect(await messages()).toBe(2);

      setFaultHook(engine, (point) => {
        if (point === "after:phase:order") throw new CrashSignal(point);
      });
      await expect(engine.runOnce(flow, { tenantId: tenant, key: "k2b", input: {} })).rejects.toBeInstanceOf(
        CrashSignal,
      );
      setFaultHook(engine, undefined);
      expect(await layer.count(tenant)).toBe(3);
      await new Promise((r) => setTimeout(r, 1_100));
      expect((await engine.runOnce(flow, { tenantId: tenant, key: "k2b", input: {} })).status).toBe(201);
      expect(await layer.count(tenant)).toBe(3);
    });

    it("enqueues and signals inside the caller's transaction: a rollback leaves no run, a commit leaves one", async () => {
      await expect(
        layer.callerTransaction(async (tx) => {
          await engine.enqueue(tx as object, flow, { tenantId: tenant, key: "k3", input: {} });
          throw new Error("the caller changes its mind");
        }),
      ).rejects.toThrow("changes its mind");
      expect(await engine.inspect(tenant, "k3")).toBeNull();
      await layer.callerTransaction((tx) =>
        engine.enqueue(tx as object, flow, { tenantId: tenant, key: "k3", input: {} }),
      );
      expect(await engine.inspect(tenant, "k3")).toMatchObject({ status: "suspended" });
      expect((await engine.runOnce(flow, { tenantId: tenant, key: "k3", input: {} })).status).toBe(201);
      expect(await layer.count(tenant)).toBe(4);

      expect((await engine.runOnce(waiter, { tenantId: tenant, key: "w1", input: {} })).status).toBe(202);
      const delivered = await layer.callerTransaction((tx) =>
        engine.signal(tenant, "w1", "approved", { by: "ops" }, { tx: tx as object }),
      );
      expect(delivered).toMatchObject({ duplicate: false });
      expect(await engine.runOnce(waiter, { tenantId: tenant, key: "w1", input: {} })).toMatchObject({
        status: 200,
        body: { approved: { by: "ops" } },
      });
    });

    it("a serialization failure or deadlock raised through the layer's own transaction is retried", async () => {
      // Drizzle throws its own query error with the driver's error as its cause: still a transient one.
      const fail = ["40001", "40P01"];
      let tries = 0;
      const retried = workflow<WithTx<Tx>>(`layers_retry_${tenant}`)
        .phase("order", async ({ tx, key, tenantId }) => {
          tries++;
          await layer.insert(tx, `${tenantId}:${key}`, tenantId);
          const code = fail.shift();
          if (code !== undefined) await layer.raise(tx, code);
          return {};
        })
        .respond(() => ({ status: 201, body: {} }));
      const before = await layer.count(tenant);
      expect((await engine.runOnce(retried, { tenantId: tenant, key: "r1", input: {} })).status).toBe(201);
      expect(tries).toBe(3);
      expect(await layer.count(tenant)).toBe(before + 1);
    });

    it("refuses a transaction of another data layer", async () => {
      await expect(engine.enqueue({ nothing: true }, flow, { tenantId: tenant, key: "k4", input: {} })).rejects.toThrow(
        /transaction of the engine's data layer/,
      );
    });
  });
}

checks("drizzle on node-postgres", drizzleOnPool);
checks("drizzle on PGlite", drizzleOnPglite, true);
checks("node-postgres", nodePostgres);

describe("the engine's fixed statements on node-postgres without Kysely", () => {
  it("are prepared once per connection, and fall back to text when the session drops them", async () => {
    const p = pool(1);
    const engine = createEngine({ db: fromNodePostgres(p) });
    const once = workflow("layers_prepared").respond(() => ({ status: 200, body: {} }));
    expect((await engine.runOnce(once, { tenantId: "prep", key: "p1", input: {} })).status).toBe(200);
    const names = async () =>
      (await p.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements")).rows.map(
        (r) => /idempo:(\w+)/.exec(r.statement)?.[1],
      );
    expect(await names()).toContain("claim");
    await p.query("DISCARD ALL");
    expect((await engine.runOnce(once, { tenantId: "prep", key: "p1", input: {} })).replayed).toBe(true);
    expect((await engine.runOnce(once, { tenantId: "prep", key: "p2", input: {} })).status).toBe(200);
    expect(await names()).toEqual([]);
    await sql`SELECT 1`.execute(t.db);
  });
});
