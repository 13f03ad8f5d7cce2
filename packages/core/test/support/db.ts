import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests address tables with plain SQL
export type TestDb = Kysely<any>;

export interface TestDatabase {
  /** Kysely on this file's own database (a clone of the migrated template). */
  readonly db: TestDb;
  readonly url: string;
  readonly name: string;
  /** A separate Kysely on the same database (for a second "process"). */
  connect(max?: number): TestDb;
}

/**
 * Give this test file its own database cloned from the migrated template,
 * with a `demo` set of business tables. Kept (and its name printed) when a
 * test fails, dropped otherwise.
 */
export function useTestDatabase(options: { pool?: number } = {}): TestDatabase {
  const serverUrl = inject("serverUrl");
  const name = uniqueName("idempo_t");
  const pools: TestDb[] = [];
  let failed = false;
  const state = { db: undefined as unknown as TestDb, url: "" };

  const connect = (max = options.pool ?? 10): TestDb => {
    const pool = new pg.Pool({ connectionString: state.url, max });
    // pool.end() resolves before its sockets are closed, so the DROP ... WITH (FORCE)
    // in afterAll can terminate a client that is still ending; without a listener
    // the pool re-emits that FATAL as an uncaught error and fails the whole file.
    pool.on("error", () => undefined);
    const db: TestDb = new Kysely({ dialect: new PostgresDialect({ pool }) });
    pools.push(db);
    return db;
  };

  beforeAll(async () => {
    state.url = await createDatabase(serverUrl, name, inject("templateDb"));
    state.db = connect();
    await sql`
      CREATE TABLE orders (
        id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
        amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text
      )`.execute(state.db);
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
