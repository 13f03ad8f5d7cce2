/**
 * migrations/current/schema.sql is the schema as the numbered migrations
 * leave it. One fresh database is migrated by the engine's runner, another
 * is built from the schema file, both in a schema that is not the default
 * (the file, like the migrations, names none), and their catalogs must
 * agree: tables and row types and their columns (type, default, nullability, order),
 * constraints, indexes, functions with their whole definitions, triggers.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import { createEngine } from "../src/index.ts";

const here = dirname(fileURLToPath(import.meta.url));
const migrationsFolder = join(here, "../../../migrations");
const schemaFile = readFileSync(join(migrationsFolder, "current/schema.sql"), "utf8");
/** A configured schema other than the default, so a name written into either side would show. */
const SCHEMA = "drift_idempo";

/** The runner's own bookkeeping table; the schema file leaves it to the runner. */
const RUNNER_TABLE = "schema_migrations";

/**
 * A function's definition as the server prints it, without `--` comments
 * and blank lines: the runner drops comments before it sends a migration,
 * and the schema file may comment a body differently; every token of code
 * still counts.
 */
function normalizeDefinition(text: string): string {
  return text
    .split("\n")
    .map((line) => line.replace(/--.*$/, "").trim())
    .filter((line) => line.length > 0)
    .join("\n");
}

interface SchemaShape {
  relations: string[];
  columns: Record<string, string[]>;
  constraints: Record<string, string>;
  indexes: Record<string, string>;
  functions: Record<string, string>;
  triggers: Record<string, string>;
}

/** Everything of `SCHEMA` a statement can depend on, as comparable text. */
async function describeSchema(client: pg.ClientBase): Promise<SchemaShape> {
  const rows = async (text: string) =>
    (await client.query(text, text.includes("$2") ? [SCHEMA, RUNNER_TABLE] : [SCHEMA])).rows;
  const relations = await rows(`
    SELECT c.relname || ' (' || c.relkind::text || ')' AS r FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname NOT IN ($2::text, $2::text || '_pkey') ORDER BY 1`);
  const columns = await rows(`
    SELECT c.relname AS t,
           a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
             || COALESCE(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') AS col
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE n.nspname = $1 AND c.relkind IN ('r', 'c') AND c.relname <> $2::text AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY c.relname, a.attnum`);
  const constraints = await rows(`
    SELECT c.relname || '.' || k.conname AS name, k.contype::text || ' ' || pg_get_constraintdef(k.oid) AS def
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname <> $2::text ORDER BY 1`);
  const indexes = await rows(`
    SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND tablename <> $2::text ORDER BY 1`);
  const functions = await rows(`
    SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS name, pg_get_functiondef(p.oid) AS def
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1`);
  const triggers = await rows(`
    SELECT c.relname || '.' || g.tgname AS name, pg_get_triggerdef(g.oid) AS def
    FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname <> $2::text AND NOT g.tgisinternal ORDER BY 1`);
  const byName = (list: { name: string; def: string }[], normalize = (s: string) => s) =>
    Object.fromEntries(list.map((r) => [r.name, normalize(r.def)]));
  const grouped: Record<string, string[]> = {};
  for (const r of columns) grouped[r.t] = [...(grouped[r.t] ?? []), r.col];
  return {
    relations: relations.map((r) => r.r),
    columns: grouped,
    constraints: byName(constraints),
    indexes: byName(indexes),
    functions: byName(functions, normalizeDefinition),
    triggers: byName(triggers),
  };
}

const created: string[] = [];
const pools: pg.Pool[] = [];
async function freshDatabase(): Promise<{ url: string; pool: pg.Pool }> {
  const name = uniqueName("idempo_drift");
  const url = await createDatabase(inject("serverUrl"), name);
  created.push(name);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pools.push(pool);
  return { url, pool };
}

let fromMigrations: pg.Pool;
let fromFile: pg.Pool;
let applied: string[];

beforeAll(async () => {
  const m = await freshDatabase();
  fromMigrations = m.pool;
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: m.url }) }) });
  try {
    applied = await createEngine({ db, schema: SCHEMA }).migrate();
  } finally {
    await db.destroy();
  }
  fromFile = (await freshDatabase()).pool;
  const client = await fromFile.connect();
  try {
    // One simple-protocol query holds the whole file, as psql -f would send it.
    // SET LOCAL: the connection goes back to the pool with its own search_path, so descriptions name the schema.
    await client.query(
      `BEGIN; CREATE SCHEMA "${SCHEMA}"; SET LOCAL search_path = "${SCHEMA}", public;\n${schemaFile}\nCOMMIT;`,
    );
  } finally {
    client.release();
  }
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  for (const name of created) await dropDatabase(inject("serverUrl"), name);
});

/** Run `change` and describe the schema in one transaction that is rolled back, as if a migration had run. */
async function describeAfter(pool: pg.Pool, change: string): Promise<SchemaShape> {
  const client = await pool.connect();
  try {
    await client.query(`BEGIN; SET LOCAL search_path = "${SCHEMA}", public;`);
    await client.query(change);
    // Described as the other side is (the catalog prints names on the search path unqualified, a trigger's function too).
    await client.query("SET LOCAL search_path = public");
    return await describeSchema(client);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

async function describePool(pool: pg.Pool): Promise<SchemaShape> {
  const client = await pool.connect();
  try {
    return await describeSchema(client);
  } finally {
    client.release();
  }
}

describe("migrations/current/schema.sql", () => {
  it("the runner applied every numbered migration and took nothing else for one", () => {
    const numbered = readdirSync(migrationsFolder)
      .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
      .sort()
      .map((f) => f.replace(/\.sql$/, ""));
    expect(applied).toEqual(numbered);
    expect(applied.some((name) => name.includes("schema"))).toBe(false);
  });

  it("describes the schema the migrations build, object by object", async () => {
    const migrated = await describePool(fromMigrations);
    const written = await describePool(fromFile);
    // The comparison sees something on both sides: tables, constraints, indexes and the statement functions.
    expect(Object.keys(migrated.columns)).toEqual([
      "concurrency_slots",
      "outbox",
      "rate_limits",
      "run_history",
      "run_record",
      "run_summary",
      "runs",
      "schedules",
      "signals",
      "tombstones",
      "workflow_versions",
    ]);
    expect(Object.keys(migrated.functions)).toContain(
      "renew_lease(p_tenant_id text, p_key text, p_owner_token text, p_lease_ms double precision)",
    );
    expect(Object.keys(migrated.indexes).length).toBeGreaterThan(5);
    expect(written).toEqual(migrated);
  });

  it("notices a migration that changes a function the file does not", async () => {
    // What a later migration restating renew_lease with one more condition would leave.
    const changed = await describeAfter(
      fromMigrations,
      `CREATE OR REPLACE FUNCTION renew_lease(
  p_tenant_id text, p_key text, p_owner_token text, p_lease_ms float8
) RETURNS boolean LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE runs SET locked_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
  WHERE tenant_id = p_tenant_id AND key = p_key AND owner_token = p_owner_token AND status = 'in_flight'
    AND locked_until > clock_timestamp();
  RETURN FOUND;
END
$$`,
    );
    const written = await describePool(fromFile);
    const name = Object.keys(written.functions).find((f) => f.startsWith("renew_lease("));
    expect(name).toBeDefined();
    expect(changed.functions[name ?? ""]).not.toBe(written.functions[name ?? ""]);
    expect({ ...changed, functions: {} }).toEqual({ ...written, functions: {} });
  });

  it("notices a schema file that changes what no migration did (an index, a default)", async () => {
    const changed = await describeAfter(
      fromFile,
      "DROP INDEX runs_parked; ALTER TABLE outbox ALTER COLUMN attempts SET DEFAULT 1;",
    );
    const migrated = await describePool(fromMigrations);
    expect(changed.indexes.runs_parked).toBeUndefined();
    expect(migrated.indexes.runs_parked).toBeDefined();
    expect(changed.columns.outbox).not.toEqual(migrated.columns.outbox);
  });

  it("compares function bodies token for token, comments and blank lines aside", () => {
    expect(normalizeDefinition("BEGIN\n  -- why\n\n  RETURN 1; -- note\nEND")).toBe("BEGIN\nRETURN 1;\nEND");
    expect(normalizeDefinition("RETURN 1;")).not.toBe(normalizeDefinition("RETURN 2;"));
  });
});
