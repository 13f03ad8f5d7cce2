/**
 * The SPEC's checkout: create the order, charge it under the derived key,
 * mark it paid and queue the receipt in the same transaction. `broken`
 * variants carry the mistakes `crashAtEveryBoundary` exists to catch.
 */
import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import type { Kysely, RawBuilder } from "kysely";
import { sql } from "kysely";
import { z } from "zod";
import type { Shop } from "./database.ts";
import type { FakeProvider } from "./provider.ts";

const Cart = z.object({ cartId: z.string(), amountCents: z.number().int().positive() });

/** What the charge step sends downstream as its idempotency key. */
type ChargeKey = "derived" | "fresh-per-call";

export function makeCheckout(
  provider: FakeProvider,
  opts: { chargeKey?: ChargeKey; name?: string; volatileParams?: boolean } = {},
) {
  const chargeKey = opts.chargeKey ?? "derived";
  return workflow<Shop>(opts.name ?? "checkout")
    .input(Cart)
    .phase("create_order", async ({ tx, input, tenantId }) => {
      const orderId = `o_${randomUUID()}`;
      await tx
        .insertInto("orders")
        .values({ id: orderId, tenant_id: tenantId, cart_id: input.cartId, amount_cents: input.amountCents })
        .execute();
      return { orderId };
    })
    .step("charge", async ({ state, input, idempotencyKey }) => {
      // The broken variant mints its own key, so a repeated call is a new charge.
      const key = chargeKey === "derived" ? idempotencyKey : randomUUID();
      // The other broken variant sends the clock and a nonce it reads inside the step.
      const volatile = opts.volatileParams ? { at: Date.now(), nonce: randomUUID() } : {};
      return {
        chargeId: provider.charge({ orderId: state.orderId, amountCents: input.amountCents, ...volatile }, key).id,
      };
    })
    .phase("record_charge", async ({ tx, state, outbox }) => {
      await tx
        .updateTable("orders")
        .set({ status: "paid", charge_id: state.chargeId })
        .where("id", "=", state.orderId)
        .execute();
      await outbox.enqueue("receipt.email", { orderId: state.orderId });
      return {};
    })
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId, chargeId: state.chargeId } }));
}

/**
 * A checkout whose step writes to the database itself (the audit row belongs
 * in a phase): a step is called again when a crash lands between its call
 * and its record, so the row is written twice.
 */
export function makeCheckoutWithWriteInStep(db: Kysely<Shop>, provider: FakeProvider) {
  return workflow<Shop>("checkout_write_in_step")
    .input(Cart)
    .phase("create_order", async ({ tx, input, tenantId }) => {
      const orderId = `o_${randomUUID()}`;
      await tx
        .insertInto("orders")
        .values({ id: orderId, tenant_id: tenantId, cart_id: input.cartId, amount_cents: input.amountCents })
        .execute();
      return { orderId };
    })
    .step("charge", async ({ state, input, idempotencyKey, tenantId }) => {
      const charge = provider.charge({ orderId: state.orderId, amountCents: input.amountCents }, idempotencyKey);
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents, status, charge_id)
                VALUES (${`audit_${randomUUID()}`}, ${tenantId}, ${input.cartId}, 0, 'audit', ${charge.id})`.execute(
        db,
      );
      return { chargeId: charge.id };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
}

/** `SELECT count(*)::int AS n ...` as a number. */
async function countOf(db: Kysely<Shop>, query: RawBuilder<{ n: number }>): Promise<number> {
  return (await query.execute(db)).rows[0]?.n ?? -1;
}

/** Counters of the checkout's effects, for one tenant. */
export function checkoutEffects(db: Kysely<Shop>, provider: FakeProvider, tenantId: string) {
  return {
    orders: () =>
      countOf(db, sql`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND status <> 'audit'`),
    paid: () =>
      countOf(db, sql`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND status = 'paid'`),
    charges: () => provider.charges,
    receipts: () =>
      countOf(
        db,
        sql`SELECT count(*)::int AS n FROM idempo.outbox WHERE tenant_id = ${tenantId} AND topic = 'receipt.email'`,
      ),
  };
}
