/**
 * The shop's own tables, next to idempo's: the subscriptions and one
 * invoice per subscription and billing period. `PRIMARY KEY (tenant_id,
 * subscription_id, period)` guards the business effect itself: a period is
 * invoiced once, whatever runs.
 */
import type { Kysely, Transaction } from "kysely";
import { sql } from "kysely";

/** The plans and their monthly price in cents. */
export const PLAN_PRICES = { basic: 900, pro: 2900 } as const;

/** A plan's name. */
export type Plan = keyof typeof PLAN_PRICES;

/** `past_due` once a renewal failed on its retry too: such a subscription is not billed again. */
type SubscriptionStatus = "active" | "past_due";

interface SubscriptionsTable {
  id: string;
  tenant_id: string;
  customer: string;
  plan: Plan;
  /** The card token the processor charges. */
  card: string;
  status: SubscriptionStatus;
  /** Billing periods paid so far. */
  paid_periods: number;
}

interface InvoicesTable {
  tenant_id: string;
  subscription_id: string;
  /** The billing period: the instant of the schedule's tick, as ISO 8601. */
  period: string;
  amount_cents: number;
  status: "open" | "paid" | "failed";
  charge_id: string | null;
  /** Charges tried: 1, or 2 when the first was declined and retried a day later. */
  tries: number;
}

/** The example's Kysely database type. */
export interface Database {
  subscriptions: SubscriptionsTable;
  invoices: InvoicesTable;
}

/** One subscriber of the demo. */
export interface Subscriber {
  readonly id: string;
  readonly customer: string;
  readonly plan: Plan;
  readonly card: string;
}

/** Create both tables if they do not exist yet. */
export async function createBillingTables(db: Kysely<Database>): Promise<void> {
  await sql`
    CREATE TABLE IF NOT EXISTS subscriptions (
      id           text    PRIMARY KEY,
      tenant_id    text    NOT NULL,
      customer     text    NOT NULL,
      plan         text    NOT NULL CHECK (plan IN ('basic', 'pro')),
      card         text    NOT NULL,
      status       text    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'past_due')),
      paid_periods integer NOT NULL DEFAULT 0
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS invoices (
      tenant_id       text    NOT NULL,
      subscription_id text    NOT NULL REFERENCES subscriptions (id),
      period          text    NOT NULL,
      amount_cents    integer NOT NULL CHECK (amount_cents > 0),
      status          text    NOT NULL CHECK (status IN ('open', 'paid', 'failed')),
      charge_id       text,
      tries           integer NOT NULL DEFAULT 0,
      PRIMARY KEY (tenant_id, subscription_id, period)
    )`.execute(db);
}

/** Insert the subscribers (active, nothing paid yet). */
export async function addSubscribers(
  db: Kysely<Database>,
  tenantId: string,
  subscribers: readonly Subscriber[],
): Promise<void> {
  await db
    .insertInto("subscriptions")
    .values(subscribers.map((s) => ({ ...s, tenant_id: tenantId, status: "active" as const, paid_periods: 0 })))
    .execute();
}

/** The active subscriptions of one plan, by id, in the phase's transaction. */
export async function activeSubscriptions(tx: Transaction<Database>, tenantId: string, plan: Plan): Promise<string[]> {
  const rows = await tx
    .selectFrom("subscriptions")
    .select("id")
    .where("tenant_id", "=", tenantId)
    .where("plan", "=", plan)
    .where("status", "=", "active")
    .orderBy("id")
    .execute();
  return rows.map((r) => r.id);
}

/** Open the invoice of one subscription's period; returns what to charge. */
export async function openInvoice(
  tx: Transaction<Database>,
  tenantId: string,
  subscriptionId: string,
  period: string,
): Promise<{ card: string; amountCents: number }> {
  const sub = await tx
    .selectFrom("subscriptions")
    .select(["card", "plan"])
    .where("tenant_id", "=", tenantId)
    .where("id", "=", subscriptionId)
    .executeTakeFirstOrThrow();
  const amountCents = PLAN_PRICES[sub.plan];
  await tx
    .insertInto("invoices")
    .values({
      tenant_id: tenantId,
      subscription_id: subscriptionId,
      period,
      amount_cents: amountCents,
      status: "open",
      tries: 0,
    })
    .execute();
  return { card: sub.card, amountCents };
}

/** Close the invoice: paid with its charge, or failed (and the subscription past due). */
export async function closeInvoice(
  tx: Transaction<Database>,
  invoice: { tenantId: string; subscriptionId: string; period: string; tries: number; chargeId: string | null },
): Promise<void> {
  const { tenantId, subscriptionId, period, tries, chargeId } = invoice;
  await tx
    .updateTable("invoices")
    .set({ status: chargeId ? "paid" : "failed", charge_id: chargeId, tries })
    .where("tenant_id", "=", tenantId)
    .where("subscription_id", "=", subscriptionId)
    .where("period", "=", period)
    .execute();
  await tx
    .updateTable("subscriptions")
    .set(chargeId ? { paid_periods: sql<number>`paid_periods + 1` } : { status: "past_due" })
    .where("tenant_id", "=", tenantId)
    .where("id", "=", subscriptionId)
    .execute();
}
