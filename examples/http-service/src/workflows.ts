import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import { z } from "zod";
import { authorize } from "./card-network.js";
import type { Database } from "./database.js";

const id = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 14)}`;

/**
 * POST /v1/charges: record the charge, ask the card network (outside any
 * transaction, with a derived key it deduplicates on), then mark it
 * captured. A crash between the network's answer and the last phase is
 * resumed by the next retry, which asks the network again with the same key.
 */
export const createCharge = workflow<Database>("create_charge")
  .input(
    z.object({
      amount: z.number().int().positive(),
      currency: z.string().regex(/^[a-z]{3}$/),
      description: z.string().max(200).optional(),
    }),
  )
  .phase("record_charge", async ({ tx, input, tenantId }) => {
    const chargeId = id("ch");
    await tx
      .insertInto("charges")
      .values({
        id: chargeId,
        tenant_id: tenantId,
        amount: input.amount,
        currency: input.currency,
        description: input.description ?? null,
        status: "pending",
      })
      .execute();
    return { chargeId };
  })
  .step("authorize", async ({ input, idempotencyKey, fail, state }) => {
    const answer = await authorize(idempotencyKey, input.amount);
    if (!answer.approved) fail(402, { error: { type: "card_error", code: "card_declined", charge: state.chargeId } });
    return { networkRef: answer.ref };
  })
  .phase("capture", async ({ tx, state }) => {
    await tx
      .updateTable("charges")
      .set({ status: "succeeded", network_ref: state.networkRef })
      .where("id", "=", state.chargeId)
      .execute();
  })
  .respond(({ state, input }) => ({
    status: 201,
    body: {
      id: state.chargeId,
      object: "charge",
      amount: input.amount,
      currency: input.currency,
      status: "succeeded",
      network_ref: state.networkRef,
    },
  }));

/**
 * POST /v1/charges/:id/refunds: refund (part of) a charge. An unknown
 * charge or an amount above what is left is refused with `ctx.reject`: it
 * is not stored, so the client may fix the request and retry the same key.
 */
export const refundCharge = workflow<Database>("refund_charge")
  .input(z.object({ charge: z.string(), amount: z.number().int().positive().optional() }))
  .phase("create_refund", async ({ tx, input, tenantId, reject }) => {
    const charge = await tx
      .selectFrom("charges")
      .select(["amount", "status"])
      .where("id", "=", input.charge)
      .where("tenant_id", "=", tenantId)
      .executeTakeFirst();
    if (charge?.status !== "succeeded") {
      return reject(404, { error: { type: "invalid_request_error", code: "resource_missing", param: "charge" } });
    }
    const refunded = await tx
      .selectFrom("refunds")
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>("amount"), eb.lit(0)).as("total"))
      .where("charge_id", "=", input.charge)
      .executeTakeFirstOrThrow();
    const amount = input.amount ?? charge.amount - Number(refunded.total);
    if (amount <= 0 || amount > charge.amount - Number(refunded.total)) {
      return reject(400, { error: { type: "invalid_request_error", code: "amount_too_large", param: "amount" } });
    }
    const refundId = id("re");
    await tx
      .insertInto("refunds")
      .values({ id: refundId, tenant_id: tenantId, charge_id: input.charge, amount })
      .execute();
    return { refundId, amount };
  })
  .respond(({ state, input }) => ({
    status: 201,
    body: { id: state.refundId, object: "refund", charge: input.charge, amount: state.amount, status: "succeeded" },
  }));
