/**
 * The workflow a new user would write first, against the installed packages
 * only: a phase that inserts an order, a step that charges a card through a
 * provider that deduplicates on the derived key, and a phase that records the
 * charge and queues a receipt through the outbox.
 */
import { workflow } from "@idempo/core";
import type { Generated } from "kysely";
import { z } from "zod";

/** The application's own tables (idempo's live in their own schema). */
export interface Database {
  orders: { id: Generated<number>; cart_id: string; amount_cents: number; charge_id: string | null };
}

/** A payment provider that honours idempotency keys: one charge per key, however often it is called. */
export class FakePayments {
  readonly charges = new Map<string, string>();
  calls = 0;

  charge(idempotencyKey: string): string {
    this.calls += 1;
    const known = this.charges.get(idempotencyKey);
    if (known !== undefined) return known;
    const id = `ch_${this.charges.size + 1}`;
    this.charges.set(idempotencyKey, id);
    return id;
  }
}

/** What the charge step does: ask the provider, or (to leave a run stuck) kill the process mid-step. */
export type ChargeCall = (idempotencyKey: string) => string;

export function checkout(charge: ChargeCall) {
  return workflow<Database>("checkout")
    .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, input }) => {
      const row = await tx
        .insertInto("orders")
        .values({ cart_id: input.cartId, amount_cents: input.amountCents, charge_id: null })
        .returning("id")
        .executeTakeFirstOrThrow();
      return { orderId: row.id };
    })
    .step("charge", async ({ idempotencyKey }) => ({ chargeId: charge(idempotencyKey) }))
    .phase("record_charge", async ({ tx, state, outbox }) => {
      await tx.updateTable("orders").set({ charge_id: state.chargeId }).where("id", "=", state.orderId).execute();
      await outbox.enqueue("receipt.email", { orderId: state.orderId });
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
}

/** The application's migration for its own table. */
export const CREATE_ORDERS = `CREATE TABLE IF NOT EXISTS orders (
  id serial PRIMARY KEY, cart_id text NOT NULL, amount_cents integer NOT NULL, charge_id text
)`;
