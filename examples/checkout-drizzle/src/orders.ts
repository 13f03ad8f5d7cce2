import { randomUUID } from "node:crypto";
import { and, count, eq } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { orders, type schema } from "./schema.js";

/**
 * The checkout's two writes, on the transaction of a phase. The checkout
 * takes them as an argument, so the same story runs on any data layer (its
 * test runs it on Drizzle, on plain node-postgres and on Kysely); this
 * example's are Drizzle's, {@link drizzleOrders}.
 */
export interface OrderWrites<Tx> {
  /** Insert a new order in the phase's transaction; returns its id. */
  insertOrder(tx: Tx, order: { tenantId: string; cartId: string; amountCents: number }): Promise<string>;
  /** Mark an order paid by a charge, in the phase's transaction. */
  markPaid(tx: Tx, orderId: string, chargeId: string): Promise<void>;
}

/** A Drizzle database or transaction with the example's schema, on either driver. */
type Drizzle = PgDatabase<PgQueryResultHKT, typeof schema>;

/** The writes with Drizzle's query builder, on Drizzle's transaction. */
export const drizzleOrders: OrderWrites<Drizzle> = {
  async insertOrder(tx, order) {
    const id = `ord_${randomUUID()}`;
    await tx.insert(orders).values({ id, ...order });
    return id;
  },
  async markPaid(tx, orderId, chargeId) {
    await tx.update(orders).set({ status: "paid", chargeId }).where(eq(orders.id, orderId));
  },
};

/** How many orders exist for one cart, and how many of them are paid. */
export async function countOrders(db: Drizzle, tenantId: string, cartId: string) {
  const cart = and(eq(orders.tenantId, tenantId), eq(orders.cartId, cartId));
  const [written] = await db.select({ n: count() }).from(orders).where(cart);
  const [paid] = await db
    .select({ n: count() })
    .from(orders)
    .where(and(cart, eq(orders.status, "paid")));
  return { written: written?.n ?? 0, paid: paid?.n ?? 0 };
}
