import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import type { FakeProvider } from "../provider.ts";
import { retryableProviderError } from "../provider.ts";
import { logEffect, updateOne } from "./effects.ts";

/** The outbox topic of the checkout's receipt. */
export const RECEIPT_TOPIC = "receipt.email";

/**
 * The checkout of examples/checkout, with its provider and mailer moved out
 * of the process: write the order, charge the card through the fake
 * provider with the derived key, record the charge and queue the receipt.
 * A declined card ends the run with a stored 402 (`ctx.fail`). Like the
 * example, the order has a unique constraint per cart; recording
 * the charge has no guard of its own, so only idempo's fencing keeps a
 * zombie from committing it twice (and the ledger would count it).
 */
export function checkoutWorkflow(provider: FakeProvider) {
  return workflow("checkout")
    .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, input, ...run }) => {
      const orderId = `ord_${randomUUID()}`;
      await sql`INSERT INTO shop.orders (id, tenant_id, cart_id, amount_cents)
                VALUES (${orderId}, ${run.tenantId}, ${input.cartId}, ${input.amountCents})`.execute(tx);
      await logEffect(tx, run, "checkout", "create_order");
      return { orderId };
    })
    .step(
      "charge",
      async ({ input, state, idempotencyKey, signal, tenantId, key, fail }) => {
        const charge = await provider.call(
          idempotencyKey,
          {
            service: "payments",
            tenantId,
            intentKey: key,
            step: "charge",
            params: { orderId: state.orderId, amountCents: input.amountCents },
          },
          signal,
        );
        // A declined card is an answer, not a crash: stored and replayed like a success.
        if (charge.declined) fail(402, { error: "card_declined", orderId: state.orderId, declineId: charge.id });
        return { chargeId: charge.id };
      },
      { retries: 2, backoffMs: 20, retryable: retryableProviderError },
    )
    .phase("record_charge", async ({ tx, state, outbox, ...run }) => {
      await updateOne(
        tx,
        sql`UPDATE shop.orders SET status = 'paid', charge_id = ${state.chargeId} WHERE id = ${state.orderId}`,
        `paying order ${state.orderId}`,
      );
      await logEffect(tx, run, "checkout", "record_charge");
      await outbox.enqueue(RECEIPT_TOPIC, { orderId: state.orderId, chargeId: state.chargeId });
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
}
