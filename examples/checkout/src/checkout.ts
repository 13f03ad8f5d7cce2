import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Receipt } from "./mailer.js";
import { RECEIPT_TOPIC } from "./mailer.js";
import type { Database } from "./orders.js";
import { insertOrder, markPaid } from "./orders.js";
import type { FakePaymentProvider } from "./payments.js";
import { PaymentError } from "./payments.js";

/**
 * The checkout of the README: write the order, charge the card, record the
 * charge and queue the receipt, answer 201. Each phase commits its writes
 * together with the recovery point; the charge runs outside any transaction
 * and carries the derived idempotency key, so calling it again after a crash
 * cannot charge twice. The receipt must go out only once the order is paid,
 * and a phase may not call other systems, so it goes through the outbox:
 * queued in the transaction that marks the order paid, mailed after that
 * commit by a relay.
 *
 * @example
 * const res = await engine.runOnce(checkoutWorkflow(payments), { tenantId: 'acme', key, input })
 */
export function checkoutWorkflow(payments: FakePaymentProvider) {
  return workflow<Database>("checkout")
    .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, tenantId, input }) => ({
      orderId: await insertOrder(tx, { tenantId, cartId: input.cartId, amountCents: input.amountCents }),
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
      await markPaid(tx, state.orderId, state.chargeId);
      const receipt: Receipt = { orderId: state.orderId, chargeId: state.chargeId };
      await outbox.enqueue(RECEIPT_TOPIC, receipt);
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
}
