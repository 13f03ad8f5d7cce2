import { readFileSync } from "node:fs";
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";

// biome-ignore lint/suspicious/noExplicitAny: the suite addresses its tables with plain SQL
export type Db = Kysely<any>;

/** Every connection a worker opens carries this prefix, so the driver can pick its victims by name. */
export const WORKER_APP_PREFIX = "idempo-torture-w";

/**
 * A pg pool that survives what the suite does to it. `pg` emits 'error' on a
 * checked-out client whose backend dies between two queries (a phase's
 * transaction waiting on workflow code when pg_terminate_backend hits);
 * with no listener that is an uncaught exception. Swallowing it there is
 * safe: the client is no longer queryable, so the next query on it fails,
 * and idempo reports that as DatabaseUnavailableError.
 */
export function openPool(url: string, applicationName: string, max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: applicationName,
    // A server that is restarting refuses connections; fail fast and let the client retry.
    connectionTimeoutMillis: 5_000,
  });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
  });
  return pool;
}

/** Kysely on a pool opened with {@link openPool}. */
export function kyselyOn(pool: pg.Pool): Db {
  return new Kysely({ dialect: new PostgresDialect({ pool }) });
}

/** idempo's migrations, then the suite's business, provider and mailbox tables. */
export async function installSchema(url: string): Promise<void> {
  const pool = openPool(url, "idempo-torture-setup", 2);
  try {
    await createEngine({ db: kyselyOn(pool) }).migrate();
    await pool.query(readFileSync(new URL("./schema.sql", import.meta.url), "utf8"));
  } finally {
    await pool.end();
  }
}

/** Run `fn` until it succeeds; for the driver's own queries while the server restarts. */
export async function persistently<T>(fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
