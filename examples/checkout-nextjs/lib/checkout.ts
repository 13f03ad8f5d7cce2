/**
 * The checkout workflow: one phase writes the order in the key's
 * transaction. A cart whose id starts with `hold-` waits in the phase until
 * a row for it appears in `releases`, so a test can hold a request in
 * flight for as long as it needs.
 */
import { workflow } from "@idempo/core";
import type { Kysely } from "kysely";
import { sql } from "kysely";
import { z } from "zod";

export const CREATE_TABLES = `
  CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, tenant_id text NOT NULL, cart_id text NOT NULL, amount_cents integer NOT NULL);
  CREATE TABLE IF NOT EXISTS releases (cart_id text PRIMARY KEY);
`;

async function heldUntilReleased(tx: Kysely<unknown>, cartId: string): Promise<void> {
  for (;;) {
    const { rows } = await sql`SELECT 1 FROM releases WHERE cart_id = ${cartId}`.execute(tx);
    if (rows.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const checkout = workflow("checkout")
  .input(z.object({ cartId: z.string().min(1), amountCents: z.number().int().positive() }))
  .phase("create_order", async ({ tx, input, tenantId }) => {
    if (input.cartId.startsWith("hold-")) await heldUntilReleased(tx, input.cartId);
    const orderId = `o_${crypto.randomUUID().slice(0, 8)}`;
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
      VALUES (${orderId}, ${tenantId}, ${input.cartId}, ${input.amountCents})`.execute(tx);
    return { orderId };
  })
  .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));
