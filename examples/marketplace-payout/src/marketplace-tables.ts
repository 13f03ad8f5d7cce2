/**
 * The marketplace's own tables, next to idempo's: orders (each of one
 * merchant), the order's lines (one per seller, with the seller's share)
 * and one payout per order and seller. `PRIMARY KEY (order_id, seller_id)`
 * on `payouts` guards the business effect itself: a seller is paid out
 * once per order, whatever runs.
 */
import type { Generated, Kysely } from "kysely";
import { sql } from "kysely";

interface OrdersTable {
  id: string;
  tenant_id: string;
  /** The merchant account the provider makes the order's transfers from. */
  merchant_id: string;
  status: Generated<"placed" | "paying_out" | "paid_out">;
}

interface OrderLinesTable {
  order_id: string;
  seller_id: string;
  /** The seller's share of the order, in cents. */
  amount_cents: number;
}

interface PayoutsTable {
  order_id: string;
  seller_id: string;
  transfer_id: string;
  amount_cents: number;
}

/** The example's Kysely database type. */
export interface Database {
  orders: OrdersTable;
  order_lines: OrderLinesTable;
  payouts: PayoutsTable;
}

/** One order of the demo: its merchant and each seller's share. */
export interface Order {
  readonly id: string;
  readonly merchantId: string;
  readonly lines: readonly { readonly sellerId: string; readonly amountCents: number }[];
}

/** Create the three tables if they do not exist yet. */
export async function createMarketplaceTables(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS orders (
      id text PRIMARY KEY,
      tenant_id text NOT NULL,
      merchant_id text NOT NULL,
      status text NOT NULL DEFAULT 'placed' CHECK (status IN ('placed', 'paying_out', 'paid_out'))
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS order_lines (
      order_id text NOT NULL REFERENCES orders (id),
      seller_id text NOT NULL,
      amount_cents integer NOT NULL CHECK (amount_cents > 0),
      PRIMARY KEY (order_id, seller_id)
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS payouts (
      order_id text NOT NULL REFERENCES orders (id),
      seller_id text NOT NULL,
      transfer_id text NOT NULL,
      amount_cents integer NOT NULL,
      PRIMARY KEY (order_id, seller_id)
    )`.execute(db);
}

/** Insert `orders` with their lines, as placed. */
export async function addOrders(db: Kysely<Database>, tenantId: string, orders: readonly Order[]): Promise<void> {
  for (const o of orders) {
    await db.insertInto("orders").values({ id: o.id, tenant_id: tenantId, merchant_id: o.merchantId }).execute();
    await db
      .insertInto("order_lines")
      .values(o.lines.map((l) => ({ order_id: o.id, seller_id: l.sellerId, amount_cents: l.amountCents })))
      .execute();
  }
}

/** What the payouts add up to. */
export interface PayoutCounts {
  readonly ordersPaidOut: number;
  readonly payouts: number;
  readonly paidOutCents: number;
  /** Order lines without their payout. */
  readonly missing: number;
}

/** Count the payouts against the order lines of `tenantId`. */
export async function payoutCounts(db: Kysely<Database>, tenantId: string): Promise<PayoutCounts> {
  const row = await sql<{ paid_out: number; payouts: number; cents: number; missing: number }>`
    SELECT
      (SELECT count(*)::int FROM orders WHERE tenant_id = ${tenantId} AND status = 'paid_out') AS paid_out,
      (SELECT count(*)::int FROM payouts p JOIN orders o ON o.id = p.order_id WHERE o.tenant_id = ${tenantId}) AS payouts,
      (SELECT coalesce(sum(p.amount_cents), 0)::int FROM payouts p JOIN orders o ON o.id = p.order_id
        WHERE o.tenant_id = ${tenantId}) AS cents,
      (SELECT count(*)::int FROM order_lines l JOIN orders o ON o.id = l.order_id
        WHERE o.tenant_id = ${tenantId}
          AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.order_id = l.order_id AND p.seller_id = l.seller_id)) AS missing
  `.execute(db);
  const r = row.rows[0] ?? { paid_out: 0, payouts: 0, cents: 0, missing: 0 };
  return { ordersPaidOut: r.paid_out, payouts: r.payouts, paidOutCents: r.cents, missing: r.missing };
}
