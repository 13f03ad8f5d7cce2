/**
 * `idempo migrate --print` for teams whose migrations run through their own
 * tool: the printed script creates what `idempo migrate` would and records
 * the same version rows, so the runner and the engine then find nothing to
 * do; `--no-transaction` leaves the transaction to the tool, and a script
 * applied twice fails instead of applying anything twice.
 */
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { idempo } from "./support/cli.ts";

const clone = useClonedDatabase("idempo_cli_print", { pool: 2 });
const MIGRATIONS = readdirSync(fileURLToPath(new URL("../../../migrations", import.meta.url)))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));

/** Run SQL text the way psql -f or a migration tool sends a file: one simple query. */
async function apply(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: clone.url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

async function versions(schema: string): Promise<{ version: number; name: string }[]> {
  const { rows } = await sql<{ version: number; name: string }>`
    SELECT version, name FROM ${sql.id(schema, "schema_migrations")} ORDER BY version`.execute(clone.db);
  return rows;
}

async function tables(schema: string): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY table_name`.execute(
    clone.db,
  );
  return rows.map((r) => r.table_name);
}

async function printed(schema: string, ...flags: string[]): Promise<string> {
  const r = await idempo(["migrate", "--print", "--schema", schema, ...flags], { DATABASE_URL: clone.url });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

async function migrateJson(schema: string, ...flags: string[]): Promise<unknown> {
  const r = await idempo(["migrate", "--json", "--schema", schema, ...flags], { DATABASE_URL: clone.url });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe("migrate --print", () => {
  it("applied as a file, it records every version, so migrate afterwards has nothing to do", async () => {
    await apply(await printed("printed_psql"));
    expect(await versions("printed_psql")).toEqual(
      MIGRATIONS.map((name) => ({ version: Number.parseInt(name, 10), name })),
    );
    // The same tables as the runner creates in the template's own schema.
    expect(await tables("printed_psql")).toEqual(await tables("idempo"));
    expect(await migrateJson("printed_psql")).toEqual({ applied: [] });
    expect(await migrateJson("printed_psql", "--print")).toEqual({ pending: [] });
    expect(await printed("printed_psql")).toBe("-- schema printed_psql is up to date: nothing to apply\n");
  });

  it("a script applied twice fails on its first version row and changes nothing", async () => {
    const script = await printed("printed_twice");
    await apply(script);
    const before = await versions("printed_twice");
    await expect(apply(script)).rejects.toMatchObject({ code: "23505" }); // unique_violation
    expect(await versions("printed_twice")).toEqual(before);
  });

  it("--no-transaction leaves BEGIN and COMMIT to the tool, whose rollback then undoes everything", async () => {
    const script = await printed("printed_tool", "--no-transaction");
    expect(script).not.toMatch(/^(BEGIN|COMMIT);$/m);
    expect(script).toContain(`INSERT INTO "printed_tool".schema_migrations (version, name) VALUES (1, '0001_runs');`);

    // A tool that fails later in the same migration rolls back: nothing of idempo's is left.
    await apply(`BEGIN;\n${script}\nROLLBACK;`);
    expect(await tables("printed_tool")).toEqual([]);

    // A tool's transaction with its own bookkeeping row, as dbmate or Flyway do.
    await apply(
      `BEGIN;\n${script}\nCREATE TABLE IF NOT EXISTS public.tool_versions (v text);\nINSERT INTO public.tool_versions VALUES ('20260101000000');\nCOMMIT;`,
    );
    expect(await migrateJson("printed_tool")).toEqual({ applied: [] });
    expect((await versions("printed_tool")).map((v) => v.name)).toEqual(MIGRATIONS);
  });

  it("--no-transaction without --print is a usage error that changes nothing", async () => {
    const r = await idempo(["migrate", "--no-transaction", "--schema", "never_made"], { DATABASE_URL: clone.url });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--no-transaction only goes with --print/);
    expect(await tables("never_made")).toEqual([]);
  });
});
