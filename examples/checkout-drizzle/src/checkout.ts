import type { WithTx } from "@idempo/core";
import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Receipt } from "./mailer.js";
import { RECEIPT_TOPIC } from "./mailer.js";
import type { OrderWrites } from "./orders.js";
import type { FakePaymentProvider } from "./payments.js";
import { PaymentError } from "./payments.js";

/**
 * The checkout of the README, with the application's writes on Drizzle:
 * write the order, charge the card, record the charge and queue the
 * receipt, answer 201. Each phase's `tx` is the data layer's own
 * transaction (a Drizzle transaction typed with the schema, for
 * `drizzleOrders`), and its writes commit together with the recovery point;
 * the charge runs outside any transaction with the derived idempotency key,
 * so calling it again after a crash cannot charge twice; the receipt goes
 * through the outbox, queued in the transaction that marks the order paid.
 *
 * @example
 * const checkout = checkoutWorkflow(payments, drizzleOrders)
 * const res = await engine.runOnce(checkout, { tenantId: 'acme', key, input })
 */
export function checkoutWorkflow<Tx>(payments: FakePaymentProvider, writes: OrderWrites<Tx>) {
  return workflow<WithTx<Tx>>("checkout")
    .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, tenantId, input }) => ({
      orderId: await writes.insertOrder(tx, { tenantId, cartId: input.cartId, amountCents: input.amountCents }),
    }))
    .step(
      "charge",
      async ({ input, state, idempotencyKey, signal }) => {
        const charge = await payments.charge(
          { orderId: state.orderId, amountCents: input.amountCents },
          { idempotencyKey, signal },
        );
        return { chargeId: charge.id };
      },
      // A 503 may pass: try twice more in-process (same key, so still one charge).
      { retries: 2, retryable: (error) => error instanceof PaymentError && error.retryable },
    )
    .phase("record_charge", async ({ tx, state, outbox }) => {
      await writes.markPaid(tx, state.orderId, state.chargeId);
      const receipt: Receipt = { orderId: state.orderId, chargeId: state.chargeId };
      await outbox.enqueue(RECEIPT_TOPIC, receipt);
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
}
