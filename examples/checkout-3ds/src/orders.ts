import { randomUUID } from "node:crypto";
import type { Generated, Kysely, Transaction } from "kysely";
import { sql } from "kysely";

/** How an order ended: paid once its payment was captured, voided when 3-D Secure never confirmed it. */
export type OrderStatus = "awaiting_payment" | "paid" | "voided";

/** The business table the checkout writes, next to idempo's own tables. */
interface OrdersTable {
  id: string;
  tenant_id: string;
  cart_id: string;
  amount_cents: number;
  status: Generated<OrderStatus>;
  payment_id: string | null;
}

/** The example's Kysely database type. */
export interface Database {
  orders: OrdersTable;
}

/**
 * Create the `orders` table if it does not exist yet. `UNIQUE (tenant_id,
 * cart_id)` guards the business effect itself, also after idempo has
 * forgotten a key (retention).
 */
export async function createOrdersTable(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS orders (
      id           text    PRIMARY KEY,
      tenant_id    text    NOT NULL,
      cart_id      text    NOT NULL,
      amount_cents integer NOT NULL CHECK (amount_cents > 0),
      status       text    NOT NULL DEFAULT 'awaiting_payment' CHECK (status IN ('awaiting_payment', 'paid', 'voided')),
      payment_id   text,
      UNIQUE (tenant_id, cart_id)
    )`.execute(db);
}

/** Insert a new order in the phase's transaction; returns its id. */
export async function insertOrder(
  tx: Transaction<Database>,
  order: { tenantId: string; cartId: string; amountCents: number },
): Promise<string> {
  const id = `ord_${randomUUID()}`;
  await tx
    .insertInto("orders")
    .values({ id, tenant_id: order.tenantId, cart_id: order.cartId, amount_cents: order.amountCents })
    .execute();
  return id;
}

/** Record how the order's payment ended, in the phase's transaction. */
export async function settleOrder(
  tx: Transaction<Database>,
  orderId: string,
  status: "paid" | "voided",
  paymentId: string,
): Promise<void> {
  await tx.updateTable("orders").set({ status, payment_id: paymentId }).where("id", "=", orderId).execute();
}

/** The status of every order of one tenant's carts, by cart id. */
export async function orderStatuses(
  db: Kysely<Database>,
  tenantId: string,
  cartIds: readonly string[],
): Promise<Map<string, OrderStatus>> {
  const rows = await db
    .selectFrom("orders")
    .select(["cart_id", "status"])
    .where("tenant_id", "=", tenantId)
    .where("cart_id", "in", [...cartIds])
    .execute();
  return new Map(rows.map((r) => [r.cart_id, r.status]));
}
