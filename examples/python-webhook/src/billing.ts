import type { Kysely } from "kysely";
import { sql } from "kysely";

/** The billing service's invoices, written by the Python side when it enqueues a payment. */
interface InvoicesTable {
  tenant_id: string;
  id: string;
  amount_cents: number;
  /** `open` until the payment's result settles it: `paid` or `failed`. */
  status: string;
  payment_reference: string | null;
}

/** One row per payment the run asked the provider for (the effect that must happen once). */
interface PaymentRequestsTable {
  tenant_id: string;
  invoice_id: string;
  amount_cents: number;
}

/** The example's Kysely database type. */
export interface Database {
  invoices: InvoicesTable;
  payment_requests: PaymentRequestsTable;
}

/**
 * Create the business tables if they do not exist yet. The primary key of
 * `payment_requests` guards the effect itself, also after idempo has
 * forgotten a key (retention).
 */
export async function createBillingTables(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS invoices (
      tenant_id         text    NOT NULL,
      id                text    NOT NULL,
      amount_cents      integer NOT NULL CHECK (amount_cents > 0),
      status            text    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'failed')),
      payment_reference text,
      PRIMARY KEY (tenant_id, id)
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS payment_requests (
      tenant_id    text    NOT NULL,
      invoice_id   text    NOT NULL,
      amount_cents integer NOT NULL,
      PRIMARY KEY (tenant_id, invoice_id)
    )`.execute(db);
}
