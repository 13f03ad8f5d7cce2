/**
 * An embedded PGlite instance for a test file: in memory, one connection,
 * migrated by the engine itself, with the `orders` table the checkout
 * workflow writes. The file destroys it in its own afterAll.
 */
import { PGlite } from "@electric-sql/pglite";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import { createEngine } from "../../src/index.ts";
import type { TestDb } from "./db.ts";

/** A fresh instance: `migrated` is what the first `migrate()` applied. */
export async function openPGlite(): Promise<{ pglite: PGlite; db: TestDb; migrated: string[] }> {
  const pglite = await PGlite.create();
  const db: TestDb = new Kysely({ dialect: new PGliteDialect(pglite) });
  const migrated = await createEngine({ db }).migrate();
  await sql`
    CREATE TABLE orders (
      id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL,
      amount_cents integer NOT NULL, status text NOT NULL DEFAULT 'created', charge_id text
    )`.execute(db);
  return { pglite, db, migrated };
}
