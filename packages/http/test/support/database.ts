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
 * enough for 25 concurrent requests, that stores values up to 16 MiB. Kept (and named) when a test fails.
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
    // The suites test the adapters' own limits (4 MiB requests, 5 MiB responses), which are above the
    // engine's default bound on a stored value (1 MiB): that engine bound is tested on its own.
    engine = createEngine({ db: clone.db, leaseMs: options.leaseMs ?? 3_000, maxPayloadBytes: 16 * 1024 * 1024 });
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
