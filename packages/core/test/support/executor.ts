import type { Kysely, Transaction } from "kysely";
import { fromKysely } from "../../src/database/kysely.ts";
import type { Executor } from "../../src/store/run-store.ts";

/**
 * The store's executor on a Kysely instance or transaction, for tests that
 * call store functions directly: the statements go through the Kysely data
 * layer, so Kysely's `log` still sees them.
 */
// biome-ignore lint/suspicious/noExplicitAny: the tests' databases, whatever their table types
export function executorOf(db: Kysely<any> | Transaction<any>): Executor {
  const session = fromKysely(db).sessionOf(db);
  if (session === undefined) throw new Error("not a Kysely instance");
  return {
    isTransaction: db.isTransaction,
    query: (text, values, name, last) => session.query(text, values, name, last),
  };
}
