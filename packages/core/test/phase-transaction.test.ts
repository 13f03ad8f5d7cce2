/**
 * A phase's transaction begins on the phase's first statement: a phase that
 * never uses `tx` opens none and commits its recovery point alone, a phase
 * that does gets its lock_timeout before its first statement (one message on
 * node-postgres, two statements on a pool on the extended protocol; none on
 * PGlite, one backend, where no other session can hold a lock), and its
 * writes still commit or vanish with the recovery point.
 */
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PostgresDialect, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ORDERS_DDL } from "../../testkit/src/index.ts";
import type { Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import type { TestDb } from "./support/db.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();

/** A phase that reads its own lock_timeout and transaction state, then writes an order. */
const probing = workflow("probe_tx", { lockTimeoutMs: 1234 })
  .phase("look", async ({ tx, tenantId, key }) => {
    const { rows } = await sql<{ timeout: string; in_tx: boolean }>`
      SELECT current_setting('lock_timeout') AS timeout, now() = statement_timestamp() AS in_tx`.execute(tx);
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 1)`.execute(
      tx,
    );
    // The INSERT gave the transaction an id; a later statement sees it only inside the same transaction.
    const later = await sql<{ same_tx: boolean }>`
      SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS same_tx`.execute(tx);
    return { timeout: rows[0]?.timeout ?? "", sameTx: later.rows[0]?.same_tx ?? false };
  })
  .respond(({ state }) => ({ status: 201, body: state }));

let leaked: unknown;
const leaking = workflow("leak_tx")
  .phase("keep", ({ tx }) => {
    leaked = tx;
    return { kept: true };
  })
  .respond(() => ({ status: 201, body: {} }));

const failing = workflow("fail_after_write")
  .phase("write", async ({ tx, tenantId, key }) => {
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 1)`.execute(
      tx,
    );
    throw new Error("after the write");
  })
  .respond(() => ({ status: 201, body: {} }));

async function orders(db: TestDb, id: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE id = ${id}`.execute(db);
  return rows[0]?.n ?? 0;
}

/** The lock_timeout a phase with `lockTimeoutMs: 1234` runs under: its own, or the session's where no lock can wait. */
type Expected = "1234ms" | "the session's";

function suite(name: string, expected: Expected, setup: () => Promise<{ engine: Engine; db: TestDb }>) {
  describe(name, () => {
    let engine: Engine;
    let db: TestDb;
    beforeAll(async () => {
      ({ engine, db } = await setup());
    });

    it(`a phase that uses tx runs in one transaction under ${expected === "1234ms" ? "its own lock_timeout, set before its first statement" : "the session's lock_timeout"}`, async () => {
      const before = await sql<{ timeout: string }>`SELECT current_setting('lock_timeout') AS timeout`.execute(db);
      // Twice: the first phase on a database learns how it takes the BEGIN, the second goes the learnt way.
      for (const run of ["look", "look-again"]) {
        const res = await engine.runOnce(probing, { tenantId: "pt", key: `${name}-${run}`, input: {} });
        const timeout = expected === "1234ms" ? "1234ms" : before.rows[0]?.timeout;
        expect(res.body).toEqual({ timeout, sameTx: true });
        expect(await orders(db, `${name}-${run}`)).toBe(1);
      }
      // SET LOCAL: the setting ended with the transaction, the connection is back to its own.
      const { rows } = await sql<{ timeout: string }>`SELECT current_setting('lock_timeout') AS timeout`.execute(db);
      expect(rows[0]?.timeout).not.toBe("1234ms");
    });

    it("a phase that throws after a write rolls the write back", async () => {
      await expect(engine.runOnce(failing, { tenantId: "pt", key: `${name}-fail`, input: {} })).rejects.toThrow(
        "after the write",
      );
      expect(await orders(db, `${name}-fail`)).toBe(0);
      // No recovery point: either no record at all (the first phase held the claim) or one still at the start.
      expect((await engine.inspect("pt", `${name}-fail`))?.recoveryPoint ?? null).toBeNull();
    });

    it("a phase that never used tx commits its recovery point, and its tx refuses statements afterwards", async () => {
      const res = await engine.runOnce(leaking, { tenantId: "pt", key: `${name}-leak`, input: {} });
      expect(res.status).toBe(201);
      expect((await engine.inspect("pt", `${name}-leak`))?.recoveryPoint).toBe("keep");
      await expect(sql`SELECT 1`.execute(leaked as Kysely<unknown>)).rejects.toThrow("the phase's transaction is over");
    });
  });
}

suite("node-postgres", "1234ms", async () => ({ engine: createEngine({ db: t.db }), db: t.db }));

let extendedPool: pg.Pool | undefined;
suite("node-postgres on the extended protocol (one statement per query)", "1234ms", async () => {
  extendedPool = new pg.Pool({ connectionString: t.url, max: 2 });
  const pool = extendedPool;
  // A backend terminated while idle (the test database is dropped with FORCE) is reported, not thrown.
  pool.on("error", () => undefined);
  // Every query goes as Parse/Bind/Execute, as some drivers and proxies send them: two commands are refused.
  const connect = async () => {
    const client = await pool.connect();
    const query = client.query.bind(client) as (config: unknown) => Promise<unknown>;
    // The engine's prepared calls arrive as { text, name } configs: they keep their name.
    const extended = (text: unknown, values?: unknown) =>
      query({ ...(typeof text === "string" ? { text } : (text as object)), values, queryMode: "extended" });
    return Object.assign(Object.create(client) as pg.PoolClient, { query: extended });
  };
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: { connect, end: async () => {} } }) });
  return { engine: createEngine({ db }), db: db as TestDb };
});

let pglite: PGlite | undefined;
suite("PGlite (one backend: no other session can hold a lock)", "the session's", async () => {
  pglite = await PGlite.create();
  const db = new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
  const engine = createEngine({ db });
  await engine.migrate();
  await sql.raw(ORDERS_DDL).execute(db);
  return { engine, db: db as TestDb };
});

afterAll(async () => {
  await pglite?.close();
  await extendedPool?.end();
});
