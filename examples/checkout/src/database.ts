import { PGlite } from "@electric-sql/pglite";
import { Kysely, PostgresDialect } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import type { Database } from "./orders.js";

/** The demo's database connection and a human-readable name for it. */
export interface DemoDatabase {
  readonly db: Kysely<Database>;
  /** Where the data lives, printed at the top of the demo (no password). */
  readonly label: string;
}

/**
 * Open the demo's database: the PostgreSQL server at `url` through a `pg`
 * pool when a URL is given, else an in-memory PGlite (PostgreSQL compiled to
 * WebAssembly) that needs no setup and is gone when the process exits.
 *
 * PGlite has a single connection, which kysely-pglite-dialect hands out to
 * one caller at a time. Inside a phase, use the phase's `tx` only: a query
 * on `db` there would wait for the connection the transaction holds.
 *
 * @example
 * const { db } = await openDatabase(process.env.DATABASE_URL)
 */
export async function openDatabase(url: string | undefined): Promise<DemoDatabase> {
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    return {
      db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
      label: `PostgreSQL (${describe(url)})`,
    };
  }
  const pglite = await PGlite.create();
  return { db: new Kysely<Database>({ dialect: new PGliteDialect(pglite) }), label: "embedded PGlite, in memory" };
}

/** `host:port/database` of a connection URL, never its credentials. */
function describe(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return "DATABASE_URL";
  }
}
