import { integer, pgTable, text, unique } from "drizzle-orm/pg-core";

/**
 * The business table the checkout writes, next to idempo's own tables. The
 * unique constraint on (tenant_id, cart_id) guards the business effect
 * itself: it still holds when a duplicate arrives after idempo has
 * forgotten the key (retention).
 */
export const orders = pgTable(
  "orders",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id").notNull(),
    cartId: text("cart_id").notNull(),
    amountCents: integer("amount_cents").notNull(),
    status: text("status", { enum: ["created", "paid"] })
      .notNull()
      .default("created"),
    chargeId: text("charge_id"),
  },
  (t) => [unique("orders_tenant_cart").on(t.tenantId, t.cartId)],
);

/** The Drizzle schema of the example. */
export const schema = { orders };

/** The table as SQL, for a database without it (the example runs no drizzle-kit migration). */
export const ORDERS_DDL = `
  CREATE TABLE IF NOT EXISTS orders (
    id           text    PRIMARY KEY,
    tenant_id    text    NOT NULL,
    cart_id      text    NOT NULL,
    amount_cents integer NOT NULL CHECK (amount_cents > 0),
    status       text    NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'paid')),
    charge_id    text,
    CONSTRAINT orders_tenant_cart UNIQUE (tenant_id, cart_id)
  )`;
