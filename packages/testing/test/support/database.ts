/**
 * Each test file gets its own database, cloned from the migrated template,
 * with the checkout example's business table. Kept (and named) when a test
 * fails, dropped otherwise.
 */
import type { Generated, Kysely } from "kysely";
import { sql } from "kysely";
import { ORDERS_DDL, useClonedDatabase } from "../../../testkit/src/index.ts";

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
  const clone = useClonedDatabase("idempo_testing", {
    pool: 8,
    prepare: async (db) => {
      await sql.raw(ORDERS_DDL).execute(db);
    },
  });
  return {
    get db() {
      return clone.db as Kysely<Shop>;
    },
  };
}
