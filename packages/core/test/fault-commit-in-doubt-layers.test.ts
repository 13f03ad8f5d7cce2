/**
 * The COMMIT in doubt (see fault-commit-in-doubt.test.ts, on Kysely) on the
 * other data layers: node-postgres and Drizzle on node-postgres. The
 * connection breaks at a phase's COMMIT after the server ran it; the caller
 * gets DatabaseUnavailableError naming the COMMIT, and the retry on the key
 * carries on after the phase, which ran once: one order.
 */
import { drizzle } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { DataLayer, WithTx } from "../src/index.ts";
import { createEngine, DatabaseUnavailableError, fromDrizzle, fromNodePostgres, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const T = "doubt-layers";
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

let breakNext = false;

/** A pool whose clients, told to, run the next COMMIT, throw its answer away and break the connection. */
function breakablePool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: t.url, max: 4 });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: unknown }).query = async (...args: unknown[]) => {
      const first = args[0] as string | { text?: unknown };
      const text = String(typeof first === "string" ? first : first?.text).trim();
      if (breakNext && text.toUpperCase() === "COMMIT") {
        breakNext = false;
        await query(...args);
        const ended = new Promise((resolve) => client.once("end", resolve));
        (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
        await ended;
        throw new Error("Connection terminated unexpectedly");
      }
      return query(...args);
    };
  });
  closers.push(() => pool.end());
  return pool;
}

const orders = pgTable("orders", {
  id: text("id").primaryKey(),
  tenantId: text("tenant_id").notNull(),
  cartId: text("cart_id").notNull(),
  amountCents: integer("amount_cents").notNull(),
});

async function ordersOf(key: string): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`SELECT id FROM orders WHERE cart_id = ${key}`.execute(t.db);
  return rows.map((r) => r.id);
}

/** A run whose first phase writes an order with `insert`, broken at that phase's COMMIT, then retried. */
async function breakAndRetry<Tx>(
  name: string,
  data: DataLayer<Tx>,
  insert: (tx: Tx, id: string, key: string) => Promise<unknown>,
) {
  const engine = createEngine({ db: data });
  const ran = { n: 0 };
  const wf = workflow<WithTx<Tx>>(name, { leaseMs: 300 })
    .phase("order", async ({ tx, key }) => {
      ran.n++;
      const id = `o-${crypto.randomUUID()}`;
      await insert(tx, id, key);
      return { orderId: id };
    })
    .phase("confirm", () => ({ confirmed: true }))
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));
  const key = `k-${name}`;
  breakNext = true;
  const err = await engine.runOnce(wf, { tenantId: T, key, input: {} }).catch((e: unknown) => e);
  expect(breakNext).toBe(false);
  const res = await engine.runOnce(wf, { tenantId: T, key, input: {}, waitInFlightMs: 30_000 });
  return { err, res, ran: ran.n, orders: await ordersOf(key) };
}

describe("a phase's COMMIT whose connection broke after it landed", () => {
  it("node-postgres: in doubt, named; the retry carries on after the phase, one order", async () => {
    const {
      err,
      res,
      ran,
      orders: ids,
    } = await breakAndRetry(
      "doubt_pg",
      fromNodePostgres<pg.PoolClient>(breakablePool()),
      (tx: pg.PoolClient, id, key) =>
        tx.query("INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ($1, $2, $3, 1)", [id, T, key]),
    );
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as DatabaseUnavailableError).inDoubt).toBe("the COMMIT of phase 'order'");
    expect(ran).toBe(1);
    expect(res).toMatchObject({ status: 201, replayed: false });
    expect(ids).toEqual([(res.body as { orderId: string }).orderId]);
  });

  it("Drizzle on node-postgres: in doubt, named; the retry carries on after the phase, one order", async () => {
    const db = drizzle(breakablePool(), { schema: { orders } });
    const {
      err,
      res,
      ran,
      orders: ids,
    } = await breakAndRetry(
      "doubt_drizzle",
      fromDrizzle(db),
      // biome-ignore lint/suspicious/noExplicitAny: Drizzle's transaction of this database
      (tx: any, id, key) => tx.insert(orders).values({ id, tenantId: T, cartId: key, amountCents: 1 }),
    );
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as DatabaseUnavailableError).inDoubt).toBe("the COMMIT of phase 'order'");
    expect(ran).toBe(1);
    expect(res).toMatchObject({ status: 201, replayed: false });
    expect(ids).toEqual([(res.body as { orderId: string }).orderId]);
  });
});
