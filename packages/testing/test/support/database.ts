/**
 * Each test file gets its own database, cloned from the migrated template,
 * with the checkout example's business table. Kept (and named) when a test
 * fails, dropped otherwise.
 */
import type { Generated } from "kysely";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";

export interface Shop {
  orders: {
    id: string;
    tenant_id: string;
    cart_id: string;
    amount_cents: number;
    status: Generated<string>;
    charge_id: string | null;
  };
}

export interface TestDatabase {
  /** Kysely on this file's own database. */
  readonly db: Kysely<Shop>;
}

export function useTestDatabase(): TestDatabase {
  const serverUrl = inject("serverUrl");
  const name = uniqueName("idempo_testing");
  let failed = false;
  const state = { db: undefined as unknown as Kysely<Shop> };

  beforeAll(async () => {
    const url = await createDatabase(serverUrl, name, inject("templateDb"));
    const pool = new pg.Pool({ connectionString: url, max: 8 });
    // A pool whose database is dropped WITH (FORCE) re-emits the FATAL; it is expected here.
    pool.on("error", () => undefined);
    state.db = new Kysely<Shop>({ dialect: new PostgresDialect({ pool }) });
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
    await state.db?.destroy();
    if (failed) console.log(`[testkit] kept database ${name} for inspection`);
    else await dropDatabase(serverUrl, name);
  });

  return {
    get db() {
      return state.db;
    },
  };
}
