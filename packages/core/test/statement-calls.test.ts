import { format, inspect } from "node:util";
import { PGlite } from "@electric-sql/pglite";
import type { LogEvent } from "kysely";
import { CamelCasePlugin, Kysely, PostgresDialect, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, InvalidOptionError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

// The engine's statement-function calls go as prepared statements on a plain
// node-postgres pool, with no wrapper; the application's queries stay unnamed.
const t = useTestDatabase();
const open: Kysely<unknown>[] = [];
afterAll(async () => {
  for (const db of open) await db.destroy();
});

/**
 * A pool that ignores the FATAL a still-closing client gets when the file's
 * database is dropped after the tests (pool.end() resolves before its sockets close).
 */
function quietPool(max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: t.url, max });
  pool.on("error", () => undefined);
  return pool;
}

/** One connection, so the session that prepared the statements is the one asked. */
function plainDb(log?: (event: LogEvent) => void): Kysely<unknown> {
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: quietPool(1) }),
    ...(log ? { log } : {}),
  });
  open.push(db);
  return db;
}

const wf = workflow("calls")
  .phase("a", async ({ tx, key }) => {
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, 'calls', 'c', 1)`.execute(tx);
    return { a: 1 };
  })
  .step("b", () => ({ b: 2 }))
  .phase("c", () => ({ c: 3 }))
  .respond(({ state }) => ({ status: 201, body: state }));

async function prepared(db: Kysely<unknown>): Promise<{ name: string; statement: string }[]> {
  const { rows } = await sql<{ name: string; statement: string }>`
    SELECT name, statement FROM pg_prepared_statements ORDER BY statement`.execute(db);
  return rows;
}

describe("the engine's statements on a plain pool", () => {
  it("are prepared once per connection by default; the workflow's own statements are not", async () => {
    const db = plainDb();
    const engine = createEngine({ db });
    for (let i = 0; i < 4; i++) {
      expect((await engine.runOnce(wf, { tenantId: "calls", key: `p${i}`, input: {} })).status).toBe(201);
      expect((await engine.runOnce(wf, { tenantId: "calls", key: `p${i}`, input: {} })).replayed).toBe(true);
    }
    const rows = await prepared(db);
    expect(rows.map((r) => r.statement.match(/^\/\* idempo:(\w+) \*\//)?.[1])).toEqual([
      "claim",
      "commit_phase",
      "step_result",
      "step_started",
    ]);
    expect(rows.every((r) => r.name.startsWith("idempo_"))).toBe(true);
    const { rows: orders } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM orders WHERE tenant_id = 'calls' AND id LIKE 'p%'`.execute(db);
    expect(orders[0]?.n).toBe(4);
  });

  it("go as plain text with preparedStatements: false", async () => {
    const db = plainDb();
    const engine = createEngine({ db, preparedStatements: false });
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "u1", input: {} })).status).toBe(201);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "u1", input: {} })).replayed).toBe(true);
    expect(await prepared(db)).toEqual([]);
  });

  it("read like their text in Kysely's log", async () => {
    const seen: string[] = [];
    let named = 0;
    const db = plainDb((event) => {
      const text = event.query.sql;
      // What a log callback typically does with the text; none of it may throw.
      if (text.startsWith("/* idempo:"))
        seen.push(`${text.replace(/\s+/g, " ").slice(0, 40)}|${String(text).length > 0}`);
      expect(JSON.parse(JSON.stringify({ sql: text })).sql).toBe(`${text}`);
      if (typeof text === "string") return;
      // The engine's calls: console.log and util.format print their text, and they iterate as it.
      named++;
      expect(inspect(text)).toBe(`${text}`);
      expect(format("%s|%o", text, text)).toBe(`${text}|${text}`);
      expect([...text].join("")).toBe(`${text}`);
      // biome-ignore lint/style/useTemplate: the + operator is what is checked
      expect(text + "").toBe(`${text}`);
    });
    const engine = createEngine({ db });
    await engine.runOnce(wf, { tenantId: "calls", key: "log1", input: {} });
    expect(seen[0]).toBe('/* idempo:claim */ SELECT * FROM "idempo|true');
    // claim, phase a, step b started and its result, phase c (which completes the run).
    expect(seen).toHaveLength(5);
    expect(named).toBe(5);
  });

  it("still work after the session drops its cached plans (DDL, ANALYZE, DISCARD PLANS)", async () => {
    const db = plainDb();
    const engine = createEngine({ db });
    await engine.runOnce(wf, { tenantId: "calls", key: "r1", input: {} });
    // Invalidate every cached plan of the session, as DDL on the tables does.
    await sql`ANALYZE idempo.runs`.execute(db);
    await sql`DISCARD PLANS`.execute(db);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "r2", input: {} })).status).toBe(201);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "r1", input: {} })).replayed).toBe(true);
  });

  it("fall back to text when the session drops the prepared statements behind node-postgres (DISCARD ALL, DEALLOCATE ALL)", async () => {
    const db = plainDb();
    const engine = createEngine({ db });
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "lost1", input: {} })).status).toBe(201);
    // node-postgres still thinks the statements are prepared on this connection; the server forgot them.
    await sql`DISCARD ALL`.execute(db);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "lost1", input: {} })).replayed).toBe(true);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "lost2", input: {} })).status).toBe(201);
    await sql`DEALLOCATE ALL`.execute(db);
    for (let i = 0; i < 3; i++) {
      expect((await engine.runOnce(wf, { tenantId: "calls", key: `lost3-${i}`, input: {} })).status).toBe(201);
    }
    expect(await prepared(db)).toEqual([]);
    // Another engine on the same connection still prepares, and survives the next loss the same way.
    const other = createEngine({ db });
    expect((await other.runOnce(wf, { tenantId: "calls", key: "lost4", input: {} })).status).toBe(201);
    await sql`DEALLOCATE ALL`.execute(db);
    expect((await other.runOnce(wf, { tenantId: "calls", key: "lost4", input: {} })).replayed).toBe(true);
  });

  it("fall back to text when the session already holds a statement of that name (a pooler's shared session)", async () => {
    // Another client of a transaction-mode pooler prepared the engine's statements on this server session.
    const elsewhere = plainDb();
    await createEngine({ db: elsewhere }).runOnce(wf, { tenantId: "calls", key: "dup1", input: {} });
    const db = plainDb();
    for (const { name, statement } of await prepared(elsewhere)) {
      await sql.raw(`PREPARE ${name} AS ${statement}`).execute(db);
    }
    const engine = createEngine({ db });
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "dup2", input: {} })).status).toBe(201);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "dup1", input: {} })).replayed).toBe(true);
  });

  it("answer the engine as the functions return them, whatever the Kysely's plugins do to rows", async () => {
    // CamelCasePlugin renames every result column (response_status to responseStatus) for the application.
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: quietPool(2) }),
      plugins: [new CamelCasePlugin()],
    });
    open.push(db);
    for (const preparedStatements of [true, false]) {
      const engine = createEngine({ db, preparedStatements });
      const key = `camel-${preparedStatements}`;
      expect(await engine.runOnce(wf, { tenantId: "calls", key, input: {} })).toMatchObject({ status: 201 });
      expect(await engine.runOnce(wf, { tenantId: "calls", key, input: {} })).toEqual({
        status: 201,
        body: { a: 1, b: 2, c: 3 },
        replayed: true,
        outcome: "succeeded",
      });
    }
  });

  it("refuse a preparedStatements option that is not a boolean", () => {
    const db = plainDb();
    expect(() => createEngine({ db, preparedStatements: "yes" as unknown as boolean })).toThrow(InvalidOptionError);
  });
});

describe("the engine's statements on PGlite", () => {
  it("go as plain text (PGlite has no named statements) and every path works", async () => {
    const pglite = await PGlite.create();
    const db = new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
    open.push(db);
    const engine = createEngine({ db });
    await engine.migrate();
    await sql`CREATE TABLE orders (id text PRIMARY KEY, tenant_id text, cart_id text, amount_cents int)`.execute(db);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "g1", input: {} })).status).toBe(201);
    expect((await engine.runOnce(wf, { tenantId: "calls", key: "g1", input: {} })).replayed).toBe(true);
    expect(await prepared(db)).toEqual([]);
  });

  it("get their tables analyzed as the tables grow, since PGlite runs no autovacuum", async () => {
    const pglite = await PGlite.create();
    const db = new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
    open.push(db);
    const engine = createEngine({ db });
    await engine.migrate();
    await sql`CREATE TABLE orders (id text PRIMARY KEY, tenant_id text, cart_id text, amount_cents int)`.execute(db);
    const history = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT reltuples::int AS n FROM pg_class WHERE oid = 'idempo.run_history'::regclass`.execute(db);
      return rows[0]?.n ?? -1;
    };
    const before = await history();
    // Each run calls four statement functions (claim, phase a, step b started and its result) and the last phase
    // completes it: 30 runs are 150 calls, past the first ANALYZE at 100.
    for (let i = 0; i < 30; i++) await engine.runOnce(wf, { tenantId: "calls", key: `a${i}`, input: {} });
    expect(before).toBeLessThanOrEqual(0);
    // The statistics see the history written so far: at least the 20 runs before the 100th call.
    expect(await history()).toBeGreaterThanOrEqual(20);
  });
});
