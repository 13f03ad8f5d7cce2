import { workflow } from "@idempo/core";
import type { Generated, Kysely } from "kysely";
import { sql } from "kysely";
import { z } from "zod";

/** The topic the checkout enqueues its receipt under; the relay publishes it to RabbitMQ. */
export const RECEIPT_TOPIC = "receipt.requested";

/** The tenant of this demo's orders. */
export const TENANT = "shop-1";

interface OrdersTable {
  id: string;
  amount_cents: number;
  charge_id: string | null;
}

/** One receipt sent. `UNIQUE (order_id)` is the effect-level guard: a copy of the message adds no row. */
interface ReceiptsTable {
  id: Generated<number>;
  order_id: string;
  /** The delivery key (`message_id`) of the copy that produced the receipt. */
  message_id: string;
}

export interface Database {
  orders: OrdersTable;
  receipts: ReceiptsTable;
}

export async function createTables(db: Kysely<Database>): Promise<void> {
  await sql`CREATE TABLE orders (id text PRIMARY KEY, amount_cents integer NOT NULL, charge_id text)`.execute(db);
  await sql`
    CREATE TABLE receipts (
      id         integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      order_id   text    NOT NULL UNIQUE,
      message_id text    NOT NULL
    )`.execute(db);
}

/** The receipt message the checkout enqueues. */
export interface ReceiptRequested {
  orderId: string;
  amountCents: number;
  chargeId: string;
}

/**
 * A checkout: create the order, charge it (a stand-in for a payment
 * provider, keyed by the derived idempotency key), and in the receipt
 * phase record the charge and enqueue the receipt in the same transaction,
 * so the message exists exactly when the charge is recorded.
 */
export const checkout = workflow<Database>("checkout")
  .input(z.object({ orderId: z.string(), amountCents: z.number().int().positive() }))
  .phase("create_order", async ({ tx, input }) => {
    await tx
      .insertInto("orders")
      .values({ id: input.orderId, amount_cents: input.amountCents, charge_id: null })
      .execute();
    return {};
  })
  .step("charge", async ({ idempotencyKey }) => ({ chargeId: `ch_${idempotencyKey.slice(-12)}` }))
  .phase("record_charge_and_receipt", async ({ tx, input, state, outbox }) => {
    await tx.updateTable("orders").set({ charge_id: state.chargeId }).where("id", "=", input.orderId).execute();
    const receipt: ReceiptRequested = {
      orderId: input.orderId,
      amountCents: input.amountCents,
      chargeId: state.chargeId,
    };
    await outbox.enqueue(RECEIPT_TOPIC, { ...receipt });
    return {};
  })
  .respond(({ input, state }) => ({ status: 201, body: { orderId: input.orderId, chargeId: state.chargeId } }));
