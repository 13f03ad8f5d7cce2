import type { Engine, ResponseSpec } from "@idempo/core";
import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Database } from "./billing-tables.js";
import { activeSubscriptions, closeInvoice, openInvoice, PLAN_PRICES } from "./billing-tables.js";
import type { CardProcessor, ChargeAnswer } from "./card-processor.js";
import { ProcessorTimeoutError } from "./card-processor.js";

/** One day in ms: how long a declined renewal waits before its retry. */
export const DAY_MS = 24 * 60 * 60 * 1000;

/** A renewal's stored answer: 200 with the charge, or 402 with the decline code of the retry. */
interface RenewalAnswer {
  readonly subscriptionId: string;
  readonly period: string;
  readonly status: "paid" | "failed";
  readonly chargeId?: string;
  readonly code?: string;
}

/** A lost answer may pass: a charge step tries twice more in-process, with the same key. */
const chargeRetries = {
  retries: 2,
  backoffMs: 20,
  retryable: (error: unknown) => error instanceof ProcessorTimeoutError,
};

const plan = z.enum(Object.keys(PLAN_PRICES) as [keyof typeof PLAN_PRICES, ...(keyof typeof PLAN_PRICES)[]]);

/** The key of one subscription's renewal for one period: the same for every run that starts it. */
export function renewalKey(subscriptionId: string, period: string): string {
  return `renewal:${subscriptionId}:${period}`;
}

/**
 * The two workflows of the billing, for one engine and one processor.
 *
 * `renewal` renews one subscription for one period: `open_invoice` writes
 * the invoice, `charge` asks the processor with the step's derived key,
 * and a decline is an answer, recorded like a charge. Then the durable
 * sleep `retry_delay` lasts a day after a decline (nothing otherwise),
 * `retry_charge` tries once more, with a key of its own, and
 * `close_invoice` marks the invoice paid or failed, the subscription past
 * due when it failed.
 *
 * `billPlan` is what a plan's monthly schedule starts: in one phase it
 * enqueues a `renewal` run for each active subscription of the plan, in
 * the phase's own transaction, so the renewals exist exactly when the
 * phase commits, under keys derived from the subscription and the period.
 *
 * @param engine what `billPlan` enqueues the renewals with.
 * @example
 * const { billPlan, renewal } = billingWorkflows(engine, new CardProcessor())
 * await engine.schedule('renew-basic', { cron: '0 0 1 * *', workflow: billPlan, tenantId, input: (tick) => ({ plan: 'basic', period: tick.at.toISOString() }) })
 */
export function billingWorkflows(engine: Pick<Engine, "enqueue">, cards: CardProcessor) {
  const renewal = workflow<Database>("renewal")
    .input(z.object({ subscriptionId: z.string(), period: z.string() }))
    .phase("open_invoice", async ({ tx, tenantId, input }) =>
      openInvoice(tx, tenantId, input.subscriptionId, input.period),
    )
    .step(
      "charge",
      async ({ input, state, idempotencyKey }): Promise<{ first: ChargeAnswer }> => ({
        first: await cards.charge({ ...input, card: state.card, amountCents: state.amountCents }, { idempotencyKey }),
      }),
      chargeRetries,
    )
    .sleep("retry_delay", ({ state }) => (state.first.status === "declined" ? DAY_MS : 0))
    .step(
      "retry_charge",
      // A processor that keeps a key's answer would repeat the first decline for its key: the retry has its own.
      async ({ input, state, idempotencyKey }): Promise<{ retry: ChargeAnswer | null }> => ({
        retry:
          state.first.status === "declined"
            ? await cards.charge({ ...input, card: state.card, amountCents: state.amountCents }, { idempotencyKey })
            : null,
      }),
      chargeRetries,
    )
    .phase("close_invoice", async ({ tx, tenantId, input, state }) => {
      const paid = [state.first, state.retry].find((c) => c?.status === "succeeded");
      const chargeId = paid?.status === "succeeded" ? paid.chargeId : null;
      await closeInvoice(tx, { tenantId, ...input, tries: state.retry ? 2 : 1, chargeId });
      return { chargeId };
    })
    .respond(({ input, state }): ResponseSpec<RenewalAnswer> => {
      if (state.chargeId) return { status: 200, body: { ...input, status: "paid", chargeId: state.chargeId } };
      const code = state.retry?.status === "declined" ? state.retry.declineCode : "card_declined";
      return { status: 402, body: { ...input, status: "failed", code } };
    });

  const billPlan = workflow<Database>("bill_plan")
    .input(z.object({ plan, period: z.string() }))
    .phase("start_renewals", async ({ tx, tenantId, input }) => {
      const ids = await activeSubscriptions(tx, tenantId, input.plan);
      for (const subscriptionId of ids) {
        const key = renewalKey(subscriptionId, input.period);
        await engine.enqueue(tx, renewal, { tenantId, key, input: { subscriptionId, period: input.period } });
      }
      return { renewals: ids.length };
    })
    .respond(({ input, state }) => ({ status: 200, body: { ...input, renewals: state.renewals } }));

  return { renewal, billPlan };
}

/** The workflows of {@link billingWorkflows}. */
export type BillingWorkflows = ReturnType<typeof billingWorkflows>;
