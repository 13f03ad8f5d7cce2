import { PGlite } from "@electric-sql/pglite";
import type { NotificationSource } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import type { Database } from "./orders.js";

/** The demo's database connection and a human-readable name for it. */
export interface DemoDatabase {
  readonly db: Kysely<Database>;
  /** Where the data lives, printed at the top of the demo (no password). */
  readonly label: string;
  /**
   * What the outbox relay LISTENs on, so it wakes the moment a phase commits
   * a message: the PGlite instance itself, or a dedicated `pg.Client` (a
   * pooled connection would go back to the pool and stop listening).
   */
  readonly listen: NotificationSource;
  /** Close every connection; the process can then exit. */
  close(): Promise<void>;
}

/**
 * Open the demo's database: the PostgreSQL server at `url` through a `pg`
 * pool (plus one client kept for LISTEN) when a URL is given, else a PGlite
 * (PostgreSQL compiled to WebAssembly) that needs no setup: in memory, gone
 * when the process exits, or kept in the data directory `pgliteDir`.
 *
 * PGlite has a single connection, which kysely-pglite-dialect hands out to
 * one caller at a time. Inside a phase, use the phase's `tx` only: a query
 * on `db` there would wait for the connection the transaction holds.
 *
 * @example
 * const { db, listen, close } = await openDatabase(process.env.DATABASE_URL)
 */
export async function openDatabase(url: string | undefined, pgliteDir?: string): Promise<DemoDatabase> {
  if (url) {
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 4 }) }),
    });
    return {
      db,
      label: `PostgreSQL (${describe(url)})`,
      listen: listener,
      async close() {
        await db.destroy();
        await listener.end();
      },
    };
  }
  const pglite = await PGlite.create(pgliteDir);
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  const label = pgliteDir ? `embedded PGlite in ${pgliteDir}` : "embedded PGlite, in memory";
  // Destroying the Kysely instance closes the PGlite instance too.
  return { db, label, listen: pglite, close: () => db.destroy() };
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
