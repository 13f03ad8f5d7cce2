import { sql as drizzleSql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import pg from "pg";
import { afterAll, describe } from "vitest";
import type { DataLayer } from "../src/index.ts";
import { fromDrizzle, fromNodePostgres } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { POOLS, typeParserCases } from "./support/type-parsers.ts";

// A pool with its own type parsers or `binary: true` (the cases:
// support/type-parsers.ts) under the node-postgres data layer and under
// Drizzle on node-postgres: the engine's statements go to the pool's
// clients, and still read as text with node-postgres' default parsers.
const t = useTestDatabase();
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

function pool(options: object): pg.Pool {
  const p = new pg.Pool({ connectionString: t.url, max: 4, ...options });
  p.on("error", () => undefined);
  closers.push(() => p.end());
  return p;
}

const orders = pgTable("orders", {
  id: text("id").primaryKey(),
  tenantId: text("tenant_id").notNull(),
  cartId: text("cart_id").notNull(),
  amountCents: integer("amount_cents").notNull(),
});

describe.each(POOLS)("a pool with $pool, under fromNodePostgres", ({ options, p }) => {
  let data: DataLayer<pg.PoolClient> | undefined;
  typeParserCases<pg.PoolClient>(
    t,
    {
      db: () => {
        data ??= fromNodePostgres<pg.PoolClient>(pool(options));
        return data;
      },
      insert: (tx, key, tenantId) =>
        tx.query("INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ($1, $2, 'c', 5)", [key, tenantId]),
      readBack: async (tx, key) =>
        (await tx.query("SELECT cart_id, status = 'paid' AS paid FROM orders WHERE id = $1", [key])).rows[0],
    },
    `pg-${p}`,
    { cart_id: "c", paid: p === "ty" ? "text:f" : false },
  );
});

function makeDb(options: object) {
  return drizzle(pool(options), { schema: { orders } });
}
type DrizzleDb = ReturnType<typeof makeDb>;
type DrizzlePoolTx = Parameters<Parameters<DrizzleDb["transaction"]>[0]>[0];

describe.each(POOLS)("a pool with $pool, under Drizzle on node-postgres", ({ options, p }) => {
  let data: DataLayer<DrizzlePoolTx> | undefined;
  typeParserCases<DrizzlePoolTx>(
    t,
    {
      db: () => {
        data ??= fromDrizzle(makeDb(options));
        return data;
      },
      insert: (tx, id, tenantId) => tx.insert(orders).values({ id, tenantId, cartId: "c", amountCents: 5 }),
      readBack: async (tx, key) =>
        (await tx.execute(drizzleSql`SELECT cart_id, status = 'paid' AS paid FROM orders WHERE id = ${key}`)).rows[0],
    },
    `dz-${p}`,
    // Drizzle gives its own queries its own parsers (pg's for a boolean), not the pool's.
    { cart_id: "c", paid: false },
  );
});
