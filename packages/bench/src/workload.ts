/**
 * What every cell runs: the business table, the two idempo workflows, the
 * bare business writes they are compared with, and the seeded keys the
 * replay, conflict and sweeper cells need.
 */
import { randomUUID } from "node:crypto";
import { workflow } from "@idempo/core";
import type { Transaction } from "kysely";
import { sql } from "kysely";

/** Tenant of the keys the new-key cells claim (one random UUID key per operation). */
export const TENANT = "bench";
/** Every request carries the same input, so seeded copies of one record share its fingerprint. */
export const INPUT = { cartId: "cart-42", amountCents: 4200 };

export const ORDERS_DDL = `
  CREATE TABLE IF NOT EXISTS orders (
    id           text PRIMARY KEY,
    tenant_id    text NOT NULL,
    cart_id      text NOT NULL,
    amount_cents integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
  )`;

/** The bare business write: one autocommit INSERT, the yardstick of every ratio. */
export const BARE_INSERT = {
  name: "bench_bare_insert",
  text: "INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ($1, $2, $3, $4)",
} as const;

export const newKey = (): string => randomUUID();

/** New key, one phase: the business INSERT and the completion commit together. */
export const orderOnce = workflow("bench_order")
  .phase("create_order", async ({ tx, tenantId, key }) => {
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
              VALUES (${key}, ${tenantId}, ${INPUT.cartId}, ${INPUT.amountCents})`.execute(tx);
    return { orderId: key };
  })
  .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));

/**
 * Phase / step / phase with no business work, the counterpart of DBOS's
 * three no-op steps: what is measured is the orchestration itself.
 */
export const threeItems = workflow("bench_three")
  .phase("reserve", () => ({ reserved: true }))
  .step("charge", () => ({ chargeId: "ch_1" }))
  .phase("confirm", () => ({ confirmed: true }))
  .respond(({ state }) => ({ status: 201, body: state }));

/**
 * The same phase / step / phase under `.concurrency` with more slots than
 * clients, so no run ever waits for one: what is measured is what the
 * limit itself costs (the slot taken with each run, the slot-checking
 * heartbeat), against {@link threeItems}.
 */
export const threeItemsLimited = workflow("bench_three_limited")
  .concurrency({ key: ({ tenantId }) => tenantId, max: 64 })
  .phase("reserve", () => ({ reserved: true }))
  .step("charge", () => ({ chargeId: "ch_1" }))
  .phase("confirm", () => ({ confirmed: true }))
  .respond(({ state }) => ({ status: 201, body: state }));

/**
 * The business write of the equal-work cells, the same statement for idempo's
 * phases and DBOS's transactions: one order row, through the Kysely
 * transaction each of them hands the function.
 */
export async function insertOrder(tx: Transaction<unknown>, id: string, tenantId: string): Promise<void> {
  await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents)
            VALUES (${id}, ${tenantId}, ${INPUT.cartId}, ${INPUT.amountCents})`.execute(tx);
}

/** The id of the second order row an equal-work workflow writes. */
export const secondOrderId = (id: string): string => `${id}:confirm`;

/**
 * Phase / step / phase with business work: each phase INSERTs an order row
 * (in the phase's transaction, with its recovery point), the step does
 * nothing. The counterpart of DBOS's transaction / step / transaction.
 */
export const threeWrites = workflow("bench_three_writes")
  .phase("reserve", async ({ tx, tenantId, key }) => {
    await insertOrder(tx, key, tenantId);
    return { reserved: true };
  })
  .step("charge", () => ({ chargeId: "ch_1" }))
  .phase("confirm", async ({ tx, tenantId, key }) => {
    await insertOrder(tx, secondOrderId(key), tenantId);
    return { confirmed: true };
  })
  .respond(({ state }) => ({ status: 201, body: state }));

/** Copies of one record, made in SQL so seeding 100 000 keys takes seconds, not minutes. */
export interface SeedSpec {
  /** Key of the record to copy (any tenant). */
  readonly fromTenant: string;
  readonly fromKey: string;
  readonly toTenant: string;
  /** Key prefix; the copies are `<prefix><n>` for n in 1..count. */
  readonly prefix: string;
  readonly count: number;
  /** Column overrides, as SQL expressions keyed by column name. */
  readonly set?: Readonly<Record<string, string>>;
  /** Copy the record's history entries too (the sweeper deletes them with the record). */
  readonly withHistory?: boolean;
}

/**
 * Overrides for {@link seedCopies} that turn a completed record into one in
 * flight under another attempt's day-long lease: every `runOnce` on it
 * answers 409.
 */
export const HELD_IN_FLIGHT: Readonly<Record<string, string>> = Object.freeze({
  status: "'in_flight'::text",
  owner_token: "'held-by-another-attempt'::text",
  locked_until: "clock_timestamp() + interval '1 day'",
  outcome: "NULL::text",
  response_status: "NULL::int",
  response_body: "NULL::json",
  expires_at: "NULL::timestamptz",
  completed_at: "NULL::timestamptz",
});

/**
 * Copy a record `count` times. `jsonb_populate_record` keeps this
 * independent of the column list, which the migrations own.
 */
export async function seedCopies(
  db: { query(text: string, params: unknown[]): Promise<unknown> },
  spec: SeedSpec,
): Promise<void> {
  const overrides = Object.entries(spec.set ?? {})
    .map(([column, expr]) => `, '${column}', ${expr}`)
    .join("");
  const runs = `
    INSERT INTO idempo.runs
    SELECT (jsonb_populate_record(r, jsonb_build_object(
              'tenant_id', $3::text, 'key', $4::text || g, 'run_id', r.run_id || '-' || g${overrides}))).*
    FROM idempo.runs r, generate_series(1, $5::int) g
    WHERE r.tenant_id = $1 AND r.key = $2`;
  const history = `
    INSERT INTO idempo.run_history
    SELECT (jsonb_populate_record(h, jsonb_build_object(
              'tenant_id', $3::text, 'key', $4::text || g, 'run_id', h.run_id || '-' || g))).*
    FROM idempo.run_history h, generate_series(1, $5::int) g
    WHERE h.tenant_id = $1 AND h.key = $2`;
  const params = [spec.fromTenant, spec.fromKey, spec.toTenant, spec.prefix, spec.count];
  await db.query(runs, params);
  if (spec.withHistory) await db.query(history, params);
}
