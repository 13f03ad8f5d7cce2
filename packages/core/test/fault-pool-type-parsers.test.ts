import { CamelCasePlugin, Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe } from "vitest";
import { useTestDatabase } from "./support/db.ts";
import { POOLS, typeParserCases } from "./support/type-parsers.ts";

// A pool with its own type parsers or `binary: true`, under a Kysely with
// CamelCasePlugin (the cases: support/type-parsers.ts). The phase's `tx`
// keeps the pool's parsing and the Kysely's plugins.
const t = useTestDatabase();

describe.each(POOLS)("a pool with $pool, under a Kysely with CamelCasePlugin", ({ options, p }) => {
  let db: Kysely<unknown>;
  beforeAll(() => {
    const pool = new pg.Pool({ connectionString: t.url, max: 4, ...options });
    pool.on("error", () => undefined);
    db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] });
  });
  afterAll(() => db.destroy());

  typeParserCases<Kysely<unknown>>(
    t,
    {
      db: () => db,
      insert: (tx, key, tenantId) =>
        sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 5)`.execute(tx),
      readBack: async (tx, key) =>
        (await sql`SELECT cart_id, status = 'paid' AS paid FROM orders WHERE id = ${key}`.execute(tx)).rows[0],
    },
    p,
    { cartId: "c", paid: p === "ty" ? "text:f" : false },
  );
});
