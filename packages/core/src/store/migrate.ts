/**
 * Apply the numbered SQL files in `migrations/` to the configured schema.
 * The whole run happens in one transaction under a transaction-scoped
 * advisory lock, so two processes migrating at once serialise: the second
 * waits, then finds every version recorded and applies nothing.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { InTransaction } from "./executor.js";
import type { Executor, Tables } from "./run-store.js";
import { sql } from "./sql.js";

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * Where the SQL files are. The top-level `migrations/` folder of the
 * repository is the one source: the TypeScript source (a checkout, tests)
 * reads it directly, so a new migration needs no build; the build copies it
 * into `dist/migrations`, which is what a packed or installed package uses.
 * Each layout looks in exactly one place, so an installed package never picks
 * up some other `migrations/` folder of the application around it.
 *
 * @param moduleUrl `import.meta.url` of this module (a parameter for tests).
 */
export function migrationsDir(moduleUrl: string = import.meta.url): string {
  const here = dirname(fileURLToPath(moduleUrl)); // <package>/src/store or <package>/dist/store
  const fromSource = basename(dirname(here)) === "src";
  const dir = fromSource ? join(here, "../../../../migrations") : join(here, "../migrations");
  if (!existsSync(dir)) {
    throw new Error(
      `idempo migrations not found in ${dir}` +
        (fromSource ? "" : " (the package was built or packed without them: build it with `pnpm run build`)"),
    );
  }
  return dir;
}

/**
 * Split a migration file into statements: each ends with `;` at the end of a
 * line, and `--` comments are dropped. Statement by statement, because
 * drivers on the extended protocol (PGlite) accept one command per query.
 * A function body between `$$` quotes is one statement with the CREATE that
 * holds it, whatever `;` its lines end with; the body closes with `$$;`.
 */
function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current: string[] = [];
  let inBody = false;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/--.*$/, "");
    current.push(line);
    // An odd number of `$$` on a line opens or closes a body.
    if ((line.split("$$").length - 1) % 2 === 1) inBody = !inBody;
    if (!inBody && /;\s*$/.test(line)) {
      statements.push(current.join("\n").replace(/;\s*$/, ""));
      current = [];
    }
  }
  statements.push(current.join("\n"));
  return statements.map((s) => s.trim()).filter((s) => s.length > 0);
}

/** Every migration file, in version order. */
function loadMigrations(): Migration[] {
  const dir = migrationsDir();
  const files = readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
  // An empty folder would "migrate" nothing and leave runOnce to fail later on missing tables.
  if (files.length === 0) throw new Error(`idempo migrations not found: no NNNN_name.sql file in ${dir}`);
  return files.map((file) => ({
    version: Number.parseInt(file.slice(0, 4), 10),
    name: file.replace(/\.sql$/, ""),
    sql: readFileSync(join(dir, file), "utf8"),
  }));
}

/** Stable 64-bit advisory lock id for "migrating this schema". */
function lockKey(schema: string) {
  return sql`hashtextextended(${`idempo.migrate:${schema}`}, 0)`;
}

/** Apply pending migrations, in one transaction `inTransaction` opens; returns the names applied (empty when up to date). */
export async function applyMigrations(inTransaction: InTransaction, t: Tables): Promise<string[]> {
  const all = loadMigrations();
  return inTransaction(async (tx) => {
    await sql`SELECT pg_advisory_xact_lock(${lockKey(t.schema)})`.execute(tx);
    await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(t.schema)}`.execute(tx);
    await sql`
      CREATE TABLE IF NOT EXISTS ${t.migrations} (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`.execute(tx);
    const { rows } = await sql<{ version: number }>`SELECT version FROM ${t.migrations}`.execute(tx);
    const done = new Set(rows.map((r) => r.version));
    const applied: string[] = [];
    // Files name tables without a schema; search_path places them in the configured one.
    await sql`SELECT set_config('search_path', quote_ident(${t.schema}) || ', public', true)`.execute(tx);
    for (const m of all) {
      if (done.has(m.version)) continue;
      // The version row goes in first: a concurrent runner that slipped past the
      // lock would fail on the primary key instead of applying the file twice.
      await sql`INSERT INTO ${t.migrations} (version, name) VALUES (${m.version}, ${m.name})`.execute(tx);
      for (const statement of splitStatements(m.sql)) await sql.raw(statement).execute(tx);
      applied.push(m.name);
    }
    return applied;
  });
}

/** Migrations not yet applied to the schema, in order (for DBAs who apply SQL by hand). */
export async function pendingMigrations(db: Executor, t: Tables): Promise<Migration[]> {
  const { rows } = await sql<{ present: boolean }>`
    SELECT to_regclass(format('%I.schema_migrations', ${t.schema}::text)) IS NOT NULL AS present
  `.execute(db);
  if (!rows[0]?.present) return loadMigrations();
  const { rows: done } = await sql<{ version: number }>`SELECT version FROM ${t.migrations}`.execute(db);
  const applied = new Set(done.map((r) => r.version));
  return loadMigrations().filter((m) => !applied.has(m.version));
}
