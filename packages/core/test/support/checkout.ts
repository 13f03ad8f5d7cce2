import { sql } from "kysely";
import { ulid } from "ulid";
import { z } from "zod";
import type { WorkflowOptions } from "../../src/index.ts";
import { workflow } from "../../src/index.ts";
import type { FakePayments } from "./payments.ts";

/** Counters of how often each piece of workflow code ran. */
interface Counters {
  create_order: number;
  charge: number;
  record_charge: number;
}

/** The SPEC's checkout workflow against the test database's `orders` table. */
export function makeCheckout(
  payments: FakePayments,
  opts: { name?: string; createOrderDelayMs?: number; options?: WorkflowOptions } = {},
) {
  const counters: Counters = { create_order: 0, charge: 0, record_charge: 0 };
  const wf = workflow(opts.name ?? "checkout", opts.options ?? {})
    .input(z.object({ cartId: z.string(), amountCents: z.number().int().positive() }))
    .phase("create_order", async ({ tx, input, tenantId }) => {
      counters.create_order++;
      if (opts.createOrderDelayMs) await new Promise((r) => setTimeout(r, opts.createOrderDelayMs));
      const orderId = `o_${ulid()}`;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${orderId}, ${tenantId}, ${input.cartId}, ${input.amountCents})`.execute(
        tx,
      );
      return { orderId };
    })
    .step("charge", async ({ state, input, idempotencyKey }) => {
      counters.charge++;
      const charge = payments.charge({ orderId: state.orderId, amountCents: input.amountCents }, idempotencyKey);
      return { chargeId: charge.id };
    })
    .phase("record_charge", async ({ tx, state }) => {
      counters.record_charge++;
      await sql`UPDATE orders SET status = 'paid', charge_id = ${state.chargeId} WHERE id = ${state.orderId}`.execute(
        tx,
      );
      return {};
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
  return { workflow: wf, counters };
}
