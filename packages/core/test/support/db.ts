import { sql } from "kysely";
import type { AnyDb, ClonedDatabase } from "../../../testkit/src/index.ts";
import { ORDERS_DDL, useClonedDatabase } from "../../../testkit/src/index.ts";

export type TestDb = AnyDb;
export type TestDatabase = ClonedDatabase;

/**
 * Give this test file its own database cloned from the migrated template,
 * with the `orders` table. Kept (and its name printed) when a test fails,
 * dropped otherwise.
 */
export function useTestDatabase(options: { pool?: number } = {}): TestDatabase {
  return useClonedDatabase("idempo_t", {
    ...options,
    prepare: async (db) => {
      await sql.raw(ORDERS_DDL).execute(db);
    },
  });
}
