/**
 * The fan-out order the child-boundary tests crash: a phase, a `.parallel`
 * item, a `.child`, a `.map` and a last phase, with the points a run of it
 * passes and the points the crash helper crashes (its own, and its first
 * children's right after each item suspends).
 */
import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import { z } from "zod";
import type { Shop } from "./database.ts";
import type { FakeProvider } from "./provider.ts";

export function makeFanOut(prefix: string, payments: FakeProvider, stock: FakeProvider, transfers: FakeProvider) {
  const payout = workflow<Shop>(`${prefix}_payout`)
    .input(z.object({ n: z.number().int() }))
    .step("transfer", ({ input, idempotencyKey }) => ({
      transferId: transfers.charge({ orderId: `payout-${input.n}`, amountCents: input.n }, idempotencyKey).id,
    }))
    .phase("record", async ({ tx, tenantId, input, state }) => {
      await tx
        .insertInto("orders")
        .values({
          id: `p_${randomUUID()}`,
          tenant_id: tenantId,
          cart_id: `child-${input.n}`,
          amount_cents: input.n,
          charge_id: state.transferId,
        })
        .execute();
      return {};
    })
    .respond(({ input, state }) => ({ status: 200, body: { n: input.n, transferId: state.transferId } }));
  return workflow<Shop>(`${prefix}_order`)
    .phase("create_order", async ({ tx, tenantId }) => {
      const orderId = `o_${randomUUID()}`;
      await tx
        .insertInto("orders")
        .values({ id: orderId, tenant_id: tenantId, cart_id: "parent", amount_cents: 1 })
        .execute();
      return { orderId };
    })
    .parallel("settle", (p) =>
      p
        .step("charge", ({ state, idempotencyKey }) => ({
          chargeId: payments.charge({ orderId: state.orderId, amountCents: 4200 }, idempotencyKey).id,
        }))
        .step("reserve", ({ state, idempotencyKey }) => ({
          reservationId: stock.charge({ orderId: state.orderId, amountCents: 1 }, idempotencyKey).id,
        })),
    )
    .child("invoice", payout, () => ({ n: 0 }))
    .map("payouts", payout, () => [1, 2, 3].map((n) => ({ n })))
    .phase("mark_paid", async ({ tx, state }) => {
      await tx
        .updateTable("orders")
        .set({ charge_id: state.settle.charge.chargeId })
        .where("id", "=", state.orderId)
        .execute();
      return {};
    })
    .respond(({ state }) => ({
      status: 201,
      body: { orderId: state.orderId, invoice: state.invoice.body, payouts: state.payouts.map((r) => r.body) },
    }));
}

export const FAN_OUT_POINTS = [
  "before:phase:create_order",
  "after:phase:create_order",
  "before:branch:settle/charge",
  "called:branch:settle/charge",
  "after:branch:settle/charge",
  "before:branch:settle/reserve",
  "called:branch:settle/reserve",
  "after:branch:settle/reserve",
  "after:parallel:settle",
  "started:child:invoice",
  "read:child:invoice",
  "after:child:invoice",
  "read:child:invoice#2",
  "after:child:invoice#2",
  "started:map:payouts",
  "read:map:payouts",
  "after:map:payouts",
  "read:map:payouts#2",
  "after:map:payouts#2",
  "before:phase:mark_paid",
  "after:phase:mark_paid",
];

/** The crash points of the fan-out order: its own, and its first children's right after each item suspends. */
const CHILD_POINTS = [
  "before:step:transfer",
  "called:step:transfer",
  "after:step:transfer",
  "before:phase:record",
  "after:phase:record",
];
export const FAN_OUT_CRASHES = FAN_OUT_POINTS.flatMap((p) => {
  if (p === "after:child:invoice") return [p, ...CHILD_POINTS.map((c) => `invoice[0]:${c}`)];
  if (p === "after:map:payouts") return [p, ...CHILD_POINTS.map((c) => `payouts[0]:${c}`)];
  return [p];
});
