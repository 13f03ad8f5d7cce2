import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import type { Database } from "./billing.js";

/** The `.waitFor` item the provider's webhook signals: the name the SQL function `signal` takes. */
const PAYMENT_RESULT = "payment_result";

/** What the webhook handler sends as the signal's payload. */
const paymentResult = z.object({ status: z.enum(["paid", "failed"]), reference: z.string().min(1) });

/**
 * Collect an invoice's payment. The Python service creates the invoice and
 * enqueues this run in one transaction (`idempo.enqueue`); a TypeScript
 * worker asks for the payment once (`request_payment`), and the run then
 * waits, held by no process, until the provider's webhook arrives through
 * `idempo.signal`; `settle` marks the invoice paid or failed. The input is
 * checked by the worker that takes the run: one that fails the schema
 * parks the run.
 *
 * @example
 * const worker = engine.startWorker({ workflows: [invoicePayment] }) // also registers it for SQL
 */
export const invoicePayment = workflow<Database>("invoice_payment")
  .input(z.object({ invoiceId: z.string().min(1), amountCents: z.number().int().positive() }))
  .phase("request_payment", async ({ tx, tenantId, input }) => {
    await sql`
      INSERT INTO payment_requests (tenant_id, invoice_id, amount_cents)
      VALUES (${tenantId}, ${input.invoiceId}, ${input.amountCents})`.execute(tx);
    return {};
  })
  .waitFor(PAYMENT_RESULT, { schema: paymentResult, timeoutMs: 7 * 24 * 60 * 60 * 1000 })
  .phase("settle", async ({ tx, tenantId, input, state }) => {
    const result = state[PAYMENT_RESULT];
    await sql`
      UPDATE invoices SET status = ${result.status}, payment_reference = ${result.reference}
      WHERE tenant_id = ${tenantId} AND id = ${input.invoiceId}`.execute(tx);
    return {};
  })
  .respond(({ input, state }) => ({
    status: 200,
    body: {
      invoiceId: input.invoiceId,
      status: state[PAYMENT_RESULT].status,
      reference: state[PAYMENT_RESULT].reference,
    },
  }));
