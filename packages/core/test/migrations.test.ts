/**
 * The migration runner: idempotent, safe when several processes start at
 * once against an empty database, and confined to the configured schema.
 */
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import { createEngine, WorkflowDefinitionError } from "../src/index.ts";
import { makeCheckout } from "./support/checkout.ts";
import { type TestDb, useTestDatabase } from "./support/db.ts";
import { countRuns } from "./support/effects.ts";
import { barrier, settle } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const here = dirname(fileURLToPath(import.meta.url));
const MIGRATIONS = readdirSync(join(here, "../../../migrations"))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));

/** Fresh, empty databases (no template), dropped after the file. */
const fresh: { name: string; pools: TestDb[] }[] = [];
async function emptyDatabase(): Promise<{ open(max?: number): TestDb }> {
  const name = uniqueName("idempo_m");
  const url = await createDatabase(inject("serverUrl"), name);
  const entry = { name, pools: [] as TestDb[] };
  fresh.push(entry);
  return {
    open(max = 2) {
      const pool = new pg.Pool({ connectionString: url, max });
      pool.on("error", () => undefined);
      const db: TestDb = new Kysely({ dialect: new PostgresDialect({ pool }) });
      entry.pools.push(db);
      return db;
    },
  };
}
afterAll(async () => {
  for (const f of fresh) {
    await Promise.all(f.pools.map((p) => p.destroy()));
    await dropDatabase(inject("serverUrl"), f.name);
  }
});

async function appliedVersions(db: TestDb, schema: string): Promise<{ version: number; name: string }[]> {
  const { rows } = await sql<{ version: number; name: string }>`
    SELECT version, name FROM ${sql.id(schema, "schema_migrations")} ORDER BY version`.execute(db);
  return rows;
}

async function tablesIn(db: TestDb, schema: string): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY table_name`.execute(db);
  return rows.map((r) => r.table_name);
}

describe("engine.migrate()", () => {
  it("applies every file once on an empty database; a second call is a no-op returning []", async () => {
    expect(MIGRATIONS.length).toBeGreaterThan(0);
    const db = (await emptyDatabase()).open();
    const engine = createEngine({ db });
    expect(await engine.migrate()).toEqual(MIGRATIONS);
    const tables = await tablesIn(db, "idempo");
    expect(await engine.migrate()).toEqual([]);
    expect(await tablesIn(db, "idempo")).toEqual(tables);
    expect(tables).toEqual(expect.arrayContaining(["runs", "run_history", "schema_migrations"]));
    expect((await appliedVersions(db, "idempo")).map((r) => r.name)).toEqual(MIGRATIONS);
  });

  it("five processes migrating one empty database at once: each migration applied exactly once, no error", async () => {
    const target = await emptyDatabase();
    const pools = Array.from({ length: 5 }, () => target.open(1));
    // Open every connection first, so the race is between statements, not connects.
    await Promise.all(pools.map((db) => sql`SELECT 1`.execute(db)));
    const engines = pools.map((db) => createEngine({ db }));
    const start = barrier(engines.length);
    const { values, errors } = await settle(
      engines.map(async (engine) => {
        await start.wait();
        return engine.migrate();
      }),
    );
    expect(errors.map(String)).toEqual([]);
    expect(values.flat().sort()).toEqual(MIGRATIONS);
    expect(values.filter((v) => v.length > 0)).toHaveLength(1);
    const db = target.open(1);
    expect((await appliedVersions(db, "idempo")).map((r) => r.name)).toEqual(MIGRATIONS);
    // The migrated database works.
    const payments = new FakePayments();
    await sql`CREATE TABLE orders (id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
      amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text)`.execute(db);
    const res = await createEngine({ db }).runOnce(makeCheckout(payments).workflow, {
      tenantId: "acme",
      key: "after-migrate",
      input: { cartId: "c", amountCents: 1 },
    });
    expect(res.status).toBe(201);
  });

  it("the template this suite clones is already migrated: migrate() returns []", async () => {
    expect(await createEngine({ db: t.db }).migrate()).toEqual([]);
  });
});

describe("custom schema", () => {
  it("createEngine({ schema: 'billing_idem' }) migrates into and runs in that schema only", async () => {
    const billing = createEngine({ db: t.db, schema: "billing_idem", leaseMs: 30_000 });
    expect(await billing.migrate()).toEqual(MIGRATIONS);
    expect(await billing.migrate()).toEqual([]);
    expect(await tablesIn(t.db, "billing_idem")).toEqual(
      expect.arrayContaining(["runs", "run_history", "schema_migrations"]),
    );
    const payments = new FakePayments();
    const { workflow: checkout } = makeCheckout(payments);
    const input = { cartId: "c-billing", amountCents: 10 };
    const res = await billing.runOnce(checkout, { tenantId: "acme", key: "schema-k", input });
    expect(res.status).toBe(201);
    expect(await countRuns(t.db, { tenantId: "acme", key: "schema-k" }, "billing_idem")).toBe(1);
    expect(await countRuns(t.db, { tenantId: "acme", key: "schema-k" }, "idempo")).toBe(0);
    expect((await billing.inspect("acme", "schema-k"))?.status).toBe("completed");
    // The default-schema engine keeps its own records: it does not see billing's key.
    const plain = createEngine({ db: t.db, leaseMs: 30_000 });
    expect(await plain.inspect("acme", "schema-k")).toBeNull();
    expect((await billing.runOnce(checkout, { tenantId: "acme", key: "schema-k", input })).replayed).toBe(true);
  });

  it("a mixed-case schema name works end to end (quoted consistently)", async () => {
    const engine = createEngine({ db: t.db, schema: "Billing_Idem_2", leaseMs: 30_000 });
    expect(await engine.migrate()).toEqual(MIGRATIONS);
    expect(await tablesIn(t.db, "Billing_Idem_2")).toEqual(expect.arrayContaining(["runs", "run_history"]));
    const payments = new FakePayments();
    const res = await engine.runOnce(makeCheckout(payments).workflow, {
      tenantId: "acme",
      key: "mixed-case",
      input: { cartId: "c-mixed", amountCents: 10 },
    });
    expect(res.status).toBe(201);
    expect(await countRuns(t.db, { key: "mixed-case" }, "Billing_Idem_2")).toBe(1);
  });

  it("migrating a custom schema does not leak its search_path into the pool's connections", async () => {
    const single = t.connect(1);
    const before = await sql<{ search_path: string }>`SHOW search_path`.execute(single);
    await createEngine({ db: single, schema: "billing_path" }).migrate();
    const after = await sql<{ search_path: string }>`SHOW search_path`.execute(single);
    expect(after.rows).toEqual(before.rows);
  });

  it("a schema name that is not a plain identifier is refused before touching the database", () => {
    for (const schema of ["", "bad-name", 'x"; DROP SCHEMA idempo; --', "1abc", "a".repeat(64)]) {
      expect(() => createEngine({ db: t.db, schema }), schema).toThrow(WorkflowDefinitionError);
    }
  });
});
