import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { beforeAll } from "vitest";
import type { AnyDb } from "../../../testkit/src/index.ts";
import { ORDERS_DDL, useClonedDatabase } from "../../../testkit/src/index.ts";

export type TestDb = AnyDb;

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
  const clone = useClonedDatabase("idempo_http_t", {
    pool: 40,
    prepare: async (db) => {
      await sql.raw(ORDERS_DDL).execute(db);
      await sql`CREATE TABLE refunds (id text PRIMARY KEY, tenant_id text NOT NULL, order_id text NOT NULL)`.execute(
        db,
      );
    },
  });
  let engine: Engine | undefined;
  beforeAll(() => {
    engine = createEngine({ db: clone.db, leaseMs: options.leaseMs ?? 3_000 });
  });
  return {
    get db() {
      return clone.db;
    },
    get engine() {
      return engine as Engine;
    },
  };
}
