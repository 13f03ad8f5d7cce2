/**
 * A test file's own database: cloned from the run's migrated template
 * before the file's tests, dropped after them, or kept (and its name
 * printed) when a test failed, so its rows can be inspected.
 */
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "./databases.js";

// biome-ignore lint/suspicious/noExplicitAny: tests address their tables with plain SQL
export type AnyDb = Kysely<any>;

export interface ClonedDatabase {
  /** Kysely on the clone, on a pool of `pool` connections (available from beforeAll on). */
  readonly db: AnyDb;
  readonly url: string;
  readonly name: string;
  /** Another Kysely on its own pool (a second "process"); closed with the file. */
  connect(max?: number): AnyDb;
}

/**
 * Register the hooks that give this test file its own database.
 * `prepare` runs once after the clone (business tables, seed data).
 */
export function useClonedDatabase(
  prefix: string,
  options: { pool?: number; prepare?: (db: AnyDb, url: string) => Promise<void> } = {},
): ClonedDatabase {
  const serverUrl = inject("serverUrl");
  const name = uniqueName(prefix);
  const pools: AnyDb[] = [];
  let failed = false;
  const state = { db: undefined as unknown as AnyDb, url: "" };

  const connect = (max = options.pool ?? 10): AnyDb => {
    const pool = new pg.Pool({ connectionString: state.url, max });
    // pool.end() resolves before its sockets close, so the DROP ... WITH (FORCE)
    // below can terminate a client that is still ending; without a listener the
    // pool re-emits that FATAL as an uncaught error and fails the whole file.
    pool.on("error", () => undefined);
    // The README's second listener: a client that is checked out between two
    // queries (an open phase transaction, a worker's round) when a test
    // terminates its backend emits 'error' on itself, not on the pool; its next
    // query fails instead, which is what the engine reports.
    pool.on("connect", (client) => client.on("error", () => undefined));
    const db: AnyDb = new Kysely({ dialect: new PostgresDialect({ pool }) });
    pools.push(db);
    return db;
  };

  beforeAll(async () => {
    state.url = await createDatabase(serverUrl, name, inject("templateDb"));
    state.db = connect();
    await options.prepare?.(state.db, state.url);
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.destroy()));
    if (failed) console.log(`[testkit] kept database ${name} for inspection`);
    else await dropDatabase(serverUrl, name);
  });

  return {
    get db() {
      return state.db;
    },
    get url() {
      return state.url;
    },
    name,
    connect,
  };
}

/** The `orders` table the checkout workflows of the test suites write to. */
export const ORDERS_DDL = `
  CREATE TABLE orders (
    id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
    amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text
  )`;
