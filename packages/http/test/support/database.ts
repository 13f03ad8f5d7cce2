import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests address tables with plain SQL
export type TestDb = Kysely<any>;

export interface TestDatabase {
  readonly db: TestDb;
  readonly engine: Engine;
}

/**
 * This file's own database, cloned from the migrated template, with the
 * business tables the test routes write to, and an engine on a pool large
 * enough for 25 concurrent requests. Kept (and named) when a test fails.
 */
export function useTestDatabase(options: { leaseMs?: number } = {}): TestDatabase {
  const serverUrl = inject("serverUrl");
  const name = uniqueName("idempo_http_t");
  let failed = false;
  const state = { db: undefined as unknown as TestDb, engine: undefined as unknown as Engine };

  beforeAll(async () => {
    const url = await createDatabase(serverUrl, name, inject("templateDb"));
    const pool = new pg.Pool({ connectionString: url, max: 40 });
    // See core's test support: a FATAL from DROP ... WITH (FORCE) must not fail the file.
    pool.on("error", () => undefined);
    state.db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    state.engine = createEngine({ db: state.db, leaseMs: options.leaseMs ?? 3_000 });
    await sql`
      CREATE TABLE orders (
        id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
        amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text
      )`.execute(state.db);
    await sql`CREATE TABLE refunds (id text PRIMARY KEY, tenant_id text NOT NULL, order_id text NOT NULL)`.execute(
      state.db,
    );
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") failed = true;
  });
  afterAll(async () => {
    await state.db?.destroy();
    if (failed) console.log(`[testkit] kept database ${name} for inspection`);
    else await dropDatabase(serverUrl, name);
  });

  return {
    get db() {
      return state.db;
    },
    get engine() {
      return state.engine;
    },
  };
}
