import { PGlite } from "@electric-sql/pglite";
import type { Generated } from "kysely";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";

/** One applied order event. The unique pair (order_id, event_type) is the business fact. */
interface LedgerTable {
  id: Generated<number>;
  order_id: string;
  event_type: string;
  amount_cents: number;
  /** The message that applied the event first; later copies are refused. */
  message_id: string;
  applied_at: Generated<Date>;
}

/** The example's Kysely database type: the business table next to idempo's own tables. */
export interface Database {
  ledger: LedgerTable;
}

/**
 * Open an in-memory PGlite (PostgreSQL compiled to WebAssembly) behind
 * Kysely. Nothing to install and nothing left behind when the process ends.
 *
 * PGlite is a single connection that kysely-pglite-dialect lends to one
 * caller at a time, so code inside a phase must query through the phase's
 * `tx`: a query on this `db` there would wait for the connection that the
 * phase's own transaction is holding.
 */
export async function openDatabase(): Promise<Kysely<Database>> {
  return new Kysely<Database>({ dialect: new PGliteDialect(await PGlite.create()) });
}

/**
 * Create the ledger. `UNIQUE (order_id, event_type)` is what keeps an event
 * from being applied twice once idempo has forgotten the message id (after
 * retention): the key record can expire, the constraint never does.
 */
export async function createLedger(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS ledger (
      id           integer     GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      order_id     text        NOT NULL,
      event_type   text        NOT NULL,
      amount_cents integer     NOT NULL CHECK (amount_cents >= 0),
      message_id   text        NOT NULL,
      applied_at   timestamptz NOT NULL DEFAULT now(),
      UNIQUE (order_id, event_type)
    )`.execute(db);
}

/** Every ledger row, oldest first. */
export async function ledgerRows(
  db: Kysely<Database>,
): Promise<{ orderId: string; eventType: string; messageId: string }[]> {
  const rows = await db.selectFrom("ledger").select(["order_id", "event_type", "message_id"]).orderBy("id").execute();
  return rows.map((r) => ({ orderId: r.order_id, eventType: r.event_type, messageId: r.message_id }));
}
