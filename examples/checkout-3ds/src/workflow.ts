import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Database } from "./orders.js";
import { insertOrder, settleOrder } from "./orders.js";
import type { PspClient } from "./psp-client.js";
import { PspError } from "./psp-client.js";
import { threeDsResultSchema } from "./psp-events.js";

/** The `.waitFor` item the provider's webhook signals: its name is what `engine.signal` uses. */
export const THREE_DS = "three_ds";

/** The checkout's final answer: 201 paid, or 402 voided with the reason. */
export interface CheckoutAnswer {
  readonly orderId: string;
  readonly paymentId: string;
  readonly status: "paid" | "voided";
  readonly code?: "3ds_not_completed";
}

/** A 5xx from the provider may pass: a step tries twice more in-process, with the same key. */
const pspRetries = { retries: 2, retryable: (error: unknown) => error instanceof PspError && error.retryable };

/**
 * A card checkout with 3-D Secure. It writes the order, authorizes the
 * card, and then waits for the provider's webhook that says how the
 * customer's challenge ended: the run is suspended there, one row with a
 * deadline, held by no process, connection or timer. The webhook's signal
 * (however often the provider repeats it) makes it due; a worker resumes
 * it after the wait, captures the payment and marks the order paid. An
 * order whose challenge never ends is voided once `confirmTimeoutMs` has
 * passed (`onTimeout`), and answers 402.
 *
 * Until then `runOnce` (and the HTTP route) answers 202 with the
 * `accepted` body: where the customer completes the challenge.
 *
 * @param options.confirmTimeoutMs how long a payment may wait for 3-D Secure, in ms (database clock).
 * @example
 * const flow = checkout3ds(new PspClient(pspUrl), { confirmTimeoutMs: 15 * 60_000 })
 * await engine.runOnce(flow, { tenantId: 'acme', key, input: { cartId, amountCents: 4999 } })  // 202
 */
export function checkout3ds(psp: PspClient, options: { confirmTimeoutMs: number }) {
  return workflow<Database>("checkout_3ds")
    .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, tenantId, input }) => ({
      orderId: await insertOrder(tx, { tenantId, cartId: input.cartId, amountCents: input.amountCents }),
    }))
    .step(
      "authorize",
      async ({ tenantId, key, input, state, idempotencyKey, signal }) => {
        // The reference comes back in the provider's events: it names this run for `engine.signal`.
        const payment = await psp.authorize(
          { orderId: state.orderId, amountCents: input.amountCents, reference: { tenantId, key } },
          { idempotencyKey, signal },
        );
        return { paymentId: payment.id, challengeUrl: payment.challengeUrl };
      },
      pspRetries,
    )
    .waitFor(THREE_DS, {
      schema: threeDsResultSchema,
      timeoutMs: options.confirmTimeoutMs,
      // Never confirmed: go on as if the challenge had failed; the next step voids.
      onTimeout: () => ({ outcome: "timed_out" as const }),
    })
    .step(
      "settle",
      async ({ state, idempotencyKey, signal }) => {
        const confirmed = state[THREE_DS].outcome === "succeeded";
        if (confirmed) await psp.capture(state.paymentId, { idempotencyKey, signal });
        else await psp.void(state.paymentId, { idempotencyKey, signal });
        return { settled: confirmed ? ("paid" as const) : ("voided" as const) };
      },
      pspRetries,
    )
    .phase("record_payment", async ({ tx, state }) => {
      await settleOrder(tx, state.orderId, state.settled, state.paymentId);
    })
    .accepted(({ state }) => ({
      status: "requires_action",
      orderId: state.orderId ?? null,
      challengeUrl: state.challengeUrl ?? null,
    }))
    .respond(({ state }): { status: number; body: CheckoutAnswer } =>
      state.settled === "paid"
        ? { status: 201, body: { orderId: state.orderId, paymentId: state.paymentId, status: "paid" } }
        : {
            status: 402,
            body: { orderId: state.orderId, paymentId: state.paymentId, status: "voided", code: "3ds_not_completed" },
          },
    );
}

/** The checkout's workflow type. */
export type Checkout3ds = ReturnType<typeof checkout3ds>;
