/**
 * The checkout's two writes on the other data layers, for the test that
 * runs the same story on each: plain node-postgres (a phase's `tx` is the
 * transaction's `PoolClient`) and Kysely (a `Transaction`).
 */
import { randomUUID } from "node:crypto";
import type { Transaction } from "kysely";
import { sql } from "kysely";
import type pg from "pg";
import type { OrderWrites } from "../../src/orders.ts";

export const nodePostgresOrders: OrderWrites<pg.PoolClient> = {
  async insertOrder(tx, order) {
    const id = `ord_${randomUUID()}`;
    await tx.query("INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ($1, $2, $3, $4)", [
      id,
      order.tenantId,
      order.cartId,
      order.amountCents,
    ]);
    return id;
  },
  async markPaid(tx, orderId, chargeId) {
    await tx.query("UPDATE orders SET status = 'paid', charge_id = $2 WHERE id = $1", [orderId, chargeId]);
  },
};

export const kyselyOrders: OrderWrites<Transaction<unknown>> = {
  async insertOrder(tx, order) {
    const id = `ord_${randomUUID()}`;
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
      VALUES (${id}, ${order.tenantId}, ${order.cartId}, ${order.amountCents})`.execute(tx);
    return id;
  },
  async markPaid(tx, orderId, chargeId) {
    await sql`UPDATE orders SET status = 'paid', charge_id = ${chargeId} WHERE id = ${orderId}`.execute(tx);
  },
};
