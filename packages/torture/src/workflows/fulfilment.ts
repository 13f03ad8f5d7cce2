import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import { sql } from "kysely";
import { z } from "zod";
import type { FakeProvider, ProviderRequest } from "../provider.ts";
import { retryableProviderError } from "../provider.ts";
import { logEffect, updateOne } from "./effects.ts";

export const INVOICE_TOPIC = "invoice.email";
export const WEBHOOK_TOPIC = "partner.webhook";

const stepOptions = { retries: 2, backoffMs: 20, retryable: retryableProviderError };

/**
 * Five phases and three steps, alternating: reserve stock, charge, allocate,
 * book the shipment, invoice (and email it), notify the partner, settle
 * (and send its webhook), close. Every phase writes the ledger; every step
 * goes to the fake provider with its derived key; an in-doubt shipment is
 * reconciled (looked up) instead of booked again. Only the invoice has a
 * unique constraint: the other phases are left unguarded on purpose, so a
 * second commit would show up as a second row instead of an error.
 */
export function fulfilmentWorkflow(provider: FakeProvider) {
  const call = (
    ctx: { idempotencyKey: string; signal: AbortSignal; tenantId: string; key: string },
    step: string,
    service: ProviderRequest["service"],
    params: ProviderRequest["params"],
  ): Promise<string> =>
    provider
      .call(ctx.idempotencyKey, { service, tenantId: ctx.tenantId, intentKey: ctx.key, step, params }, ctx.signal)
      .then((answer) => answer.id);

  return workflow("fulfilment")
    .input(
      z.object({
        orderRef: z.string().min(1),
        items: z.number().int().positive(),
        amountCents: z.number().int().positive(),
      }),
    )
    .phase("reserve", async ({ tx, input, ...run }) => {
      const reservationId = `res_${randomUUID()}`;
      await sql`INSERT INTO shop.reservations (id, tenant_id, order_ref, items)
                VALUES (${reservationId}, ${run.tenantId}, ${input.orderRef}, ${input.items})`.execute(tx);
      await logEffect(tx, run, "fulfilment", "reserve");
      return { reservationId };
    })
    .step(
      "charge",
      async (ctx) => ({
        chargeId: await call(ctx, "charge", "payments", {
          reservationId: ctx.state.reservationId,
          amountCents: ctx.input.amountCents,
        }),
      }),
      stepOptions,
    )
    .phase("allocate", async ({ tx, state, ...run }) => {
      await updateOne(
        tx,
        sql`UPDATE shop.reservations SET status = 'allocated' WHERE id = ${state.reservationId}`,
        `allocating ${state.reservationId}`,
      );
      await logEffect(tx, run, "fulfilment", "allocate");
    })
    .step(
      "ship",
      async (ctx) => ({
        shipmentId: await call(ctx, "ship", "carrier", {
          reservationId: ctx.state.reservationId,
          items: ctx.input.items,
        }),
      }),
      {
        ...stepOptions,
        // In doubt after a crash: ask the carrier whether the booking exists before booking again.
        reconcile: async ({ idempotencyKey }) => {
          const shipmentId = await provider.lookup(idempotencyKey);
          return shipmentId === undefined ? undefined : { shipmentId };
        },
      },
    )
    .phase("invoice", async ({ tx, input, state, outbox, ...run }) => {
      const invoiceId = `inv_${randomUUID()}`;
      await sql`INSERT INTO shop.invoices (id, tenant_id, order_ref, charge_id, shipment_id)
                VALUES (${invoiceId}, ${run.tenantId}, ${input.orderRef}, ${state.chargeId}, ${state.shipmentId})`.execute(
        tx,
      );
      await logEffect(tx, run, "fulfilment", "invoice");
      await outbox.enqueue(INVOICE_TOPIC, { invoiceId, chargeId: state.chargeId });
      return { invoiceId };
    })
    .step(
      "notify",
      async (ctx) => ({ notificationId: await call(ctx, "notify", "partner", { invoiceId: ctx.state.invoiceId }) }),
      stepOptions,
    )
    .phase("settle", async ({ tx, state, outbox, ...run }) => {
      await updateOne(
        tx,
        sql`UPDATE shop.reservations SET status = 'settled' WHERE id = ${state.reservationId}`,
        `settling ${state.reservationId}`,
      );
      await logEffect(tx, run, "fulfilment", "settle");
      await outbox.enqueue(WEBHOOK_TOPIC, { invoiceId: state.invoiceId, notificationId: state.notificationId });
    })
    .phase("close", async ({ tx, state, ...run }) => {
      await updateOne(
        tx,
        sql`UPDATE shop.invoices SET closed = true WHERE id = ${state.invoiceId}`,
        `closing ${state.invoiceId}`,
      );
      await logEffect(tx, run, "fulfilment", "close");
    })
    .respond(({ state }) => ({
      status: 200,
      body: {
        reservationId: state.reservationId,
        chargeId: state.chargeId,
        shipmentId: state.shipmentId,
        invoiceId: state.invoiceId,
        notificationId: state.notificationId,
      },
    }));
}
