/**
 * The payout workflows. `payout_order` reads the order's lines and fans
 * out one `seller_transfer` run per seller with `.map`: the children are
 * created in the transaction that records the item's start, under keys
 * derived from the order's run, and the order's run suspends, holding
 * nothing, until every transfer has completed; then it marks the order
 * paid out. Each `seller_transfer` makes its transfer with its step's
 * derived key and records the payout in its phase.
 *
 * Two limits hold for every process that shares the database: at most
 * `TRANSFERS_PER_MERCHANT` transfers run at once per merchant account
 * (`.concurrency` on the child), and the provider's requests stay under
 * its rate limit (the step's `rateLimit`, a token bucket in the database).
 */
import type { RateLimitOptions } from "@idempo/core";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import type { PayoutProvider } from "./payout-provider.js";
import { ProviderRateLimitError, ProviderTimeoutError } from "./payout-provider.js";

/**
 * The provider's allowance for the whole fleet, shared through the
 * database, a margin below the provider's own limit (10 a second, bursts
 * of 3): give every process the same.
 */
export const RATE_LIMITS: Record<"provider", RateLimitOptions> = { provider: { perSecond: 8, burst: 2 } };
/** At most this many transfers at once per merchant account, across every process. */
export const TRANSFERS_PER_MERCHANT = 2;

const transferInput = z.object({
  orderId: z.string(),
  merchantId: z.string(),
  sellerId: z.string(),
  amountCents: z.number().int().positive(),
});

/** Both workflows, bound to one provider. */
export function payoutWorkflows(provider: PayoutProvider) {
  const sellerTransfer = workflow("seller_transfer")
    .input(transferInput)
    .concurrency({ key: ({ tenantId, input }) => `${tenantId}:${input.merchantId}`, max: TRANSFERS_PER_MERCHANT })
    .step(
      "transfer",
      async ({ input, idempotencyKey }) =>
        provider.transfer(
          {
            merchantId: input.merchantId,
            sellerId: input.sellerId,
            orderId: input.orderId,
            amountCents: input.amountCents,
          },
          { idempotencyKey },
        ),
      {
        rateLimit: "provider",
        // A lost answer: ask again with the same key; the provider answers without transferring again.
        // A 429 (which the bucket keeps from happening) would be tried again a little later.
        retries: 3,
        backoffMs: 100,
        retryable: (error) => error instanceof ProviderTimeoutError || error instanceof ProviderRateLimitError,
      },
    )
    .phase("record", async ({ tx, input, state }) => {
      await sql`INSERT INTO payouts (order_id, seller_id, transfer_id, amount_cents)
                VALUES (${input.orderId}, ${input.sellerId}, ${state.transferId}, ${state.amountCents})`.execute(tx);
    })
    .respond(({ input, state }) => ({
      status: 201,
      body: { sellerId: input.sellerId, transferId: state.transferId, amountCents: state.amountCents },
    }));

  const payoutOrder = workflow("payout_order")
    .input(z.object({ orderId: z.string() }))
    .phase("load_lines", async ({ tx, input }) => {
      const order = await sql<{ merchant_id: string }>`
        UPDATE orders SET status = 'paying_out' WHERE id = ${input.orderId} RETURNING merchant_id`.execute(tx);
      const merchantId = order.rows[0]?.merchant_id;
      if (merchantId === undefined) throw new Error(`order ${input.orderId} does not exist`);
      const lines = await sql<{ seller_id: string; amount_cents: number }>`
        SELECT seller_id, amount_cents FROM order_lines WHERE order_id = ${input.orderId} ORDER BY seller_id`.execute(
        tx,
      );
      return { merchantId, lines: lines.rows.map((l) => ({ sellerId: l.seller_id, amountCents: l.amount_cents })) };
    })
    .map("transfers", sellerTransfer, ({ input, state }) =>
      state.lines.map((l) => ({ orderId: input.orderId, merchantId: state.merchantId, ...l })),
    )
    .phase("mark_paid_out", async ({ tx, input }) => {
      await sql`UPDATE orders SET status = 'paid_out' WHERE id = ${input.orderId}`.execute(tx);
    })
    .respond(({ input, state }) => ({
      status: 200,
      body: { orderId: input.orderId, transfers: state.transfers.map((t) => t.body) },
    }));

  return { payoutOrder, sellerTransfer };
}

/** The workflows' types, for the demo and the test. */
export type PayoutWorkflows = ReturnType<typeof payoutWorkflows>;
