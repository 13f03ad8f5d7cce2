import { sql } from "kysely";
import type { AnyDb, ClonedDatabase } from "../../../testkit/src/index.ts";
import { ORDERS_DDL, useClonedDatabase } from "../../../testkit/src/index.ts";

export type TestDb = AnyDb;
export type TestDatabase = ClonedDatabase;

/**
 * Give this test file its own database cloned from the migrated template,
 * with the `orders` table. Kept (and its name printed) when a test fails,
 * dropped otherwise; `name` is the prefix of its name (Default: "idempo_t").
 */
export function useTestDatabase(options: { pool?: number; name?: string } = {}): TestDatabase {
  const { name = "idempo_t", ...rest } = options;
  return useClonedDatabase(name, {
    ...rest,
    prepare: async (db) => {
      await sql.raw(ORDERS_DDL).execute(db);
    },
  });
}
