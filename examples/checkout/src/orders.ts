import { randomUUID } from "node:crypto";
import type { Generated, Kysely, Transaction } from "kysely";
import { sql } from "kysely";

/** The business table the checkout writes, next to idempo's own tables. */
interface OrdersTable {
  id: string;
  tenant_id: string;
  cart_id: string;
  amount_cents: number;
  status: Generated<"created" | "paid">;
  charge_id: string | null;
}

/** The demo's Kysely database type. */
export interface Database {
  orders: OrdersTable;
}

/**
 * Create the `orders` table if it does not exist yet. The unique constraint
 * on (tenant_id, cart_id) guards the business effect itself: it still holds
 * when a duplicate arrives after idempo has forgotten the key (retention).
 */
export async function createOrdersTable(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS orders (
      id           text    PRIMARY KEY,
      tenant_id    text    NOT NULL,
      cart_id      text    NOT NULL,
      amount_cents integer NOT NULL CHECK (amount_cents > 0),
      status       text    NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'paid')),
      charge_id    text,
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

/** Mark an order paid by a charge, in the phase's transaction. */
export async function markPaid(tx: Transaction<Database>, orderId: string, chargeId: string): Promise<void> {
  await tx.updateTable("orders").set({ status: "paid", charge_id: chargeId }).where("id", "=", orderId).execute();
}

/** How many orders exist for one cart, and how many of them are paid. */
export async function countOrders(
  db: Kysely<Database>,
  tenantId: string,
  cartId: string,
): Promise<{ written: number; paid: number }> {
  const row = await db
    .selectFrom("orders")
    .select([
      sql<number>`count(*)::int`.as("written"),
      sql<number>`count(*) FILTER (WHERE status = 'paid')::int`.as("paid"),
    ])
    .where("tenant_id", "=", tenantId)
    .where("cart_id", "=", cartId)
    .executeTakeFirstOrThrow();
  return { written: row.written, paid: row.paid };
}
