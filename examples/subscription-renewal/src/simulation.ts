/**
 * Months of billing in seconds: the engine's time moved by the test clock
 * of `@idempo/testing`, which fires each schedule's tick and runs what
 * becomes due (the renewals, the retries a day later) in this process, in
 * the order the real months would. What the demo and the test share.
 * Under the clock, a tick's `at` (the period of its invoices) is the
 * database's time at which the clock fired it, `advancedMs` earlier than
 * the simulated calendar says.
 */
import type { Engine } from "@idempo/core";
import type { ClockReport, TestClock } from "@idempo/testing";
import type { Kysely } from "kysely";
import { sql } from "kysely";
import type { Database, Subscriber } from "./billing-tables.js";

/** The tenant the demo bills. */
export const TENANT = "acme";

/** Two subscribers per plan, one test card each (see card-processor.ts). */
export const SUBSCRIBERS: readonly Subscriber[] = [
  { id: "sub_alice", customer: "Alice", plan: "basic", card: "tok_visa" },
  { id: "sub_bob", customer: "Bob", plan: "basic", card: "tok_paid_late" },
  { id: "sub_carol", customer: "Carol", plan: "pro", card: "tok_lost_answer" },
  { id: "sub_dave", customer: "Dave", plan: "pro", card: "tok_expired" },
];

/** The next tick, reached: its instant and what the clock ran up to it. */
export interface Tick {
  /** The tick's instant on the simulated calendar (the clock's time, not the database's). */
  readonly at: Date;
  /** The clock's report up to and including the tick: the plans' runs and the renewals' first tries. */
  readonly report: ClockReport;
}

/**
 * Move the clock to the next tick of the schedules (the first of the
 * month, midnight UTC), where it fires them and runs everything due until
 * nothing is: the plans' runs, the renewals, the first tries. The retries
 * of the declines are due a day later: `clock.advance(DAY_MS)`.
 */
export async function nextTick(clock: TestClock, engine: Engine, db: Kysely<Database>): Promise<Tick> {
  const ticks = (await engine.listSchedules()).flatMap((s) => (s.nextTickAt ? [s.nextTickAt.getTime()] : []));
  if (ticks.length === 0) throw new Error("no schedule has a next tick");
  const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  const next = Math.min(...ticks);
  // Stored instants are the clock's time moved back by advancedMs (docs/testing.md): add it back for the calendar.
  const at = new Date(next + clock.advancedMs);
  const report = await clock.advance(Math.max(0, next - (rows[0] as { now: Date }).now.getTime()));
  return { at, report };
}

/** What the invoices say, over every period so far. */
export interface InvoiceCounts {
  readonly invoices: number;
  readonly paidFirstTry: number;
  readonly retried: number;
  readonly paidOnRetry: number;
  readonly failed: number;
  readonly paidCents: number;
  readonly pastDue: number;
}

/** Count the invoices and past-due subscriptions of `tenantId`. */
export async function invoiceCounts(db: Kysely<Database>, tenantId: string): Promise<InvoiceCounts> {
  const { rows } = await sql<Record<keyof InvoiceCounts, number>>`
    SELECT count(*)::int AS invoices,
           (count(*) FILTER (WHERE status = 'paid' AND tries = 1))::int AS "paidFirstTry",
           (count(*) FILTER (WHERE tries = 2))::int AS retried,
           (count(*) FILTER (WHERE status = 'paid' AND tries = 2))::int AS "paidOnRetry",
           (count(*) FILTER (WHERE status = 'failed'))::int AS failed,
           coalesce(sum(amount_cents) FILTER (WHERE status = 'paid'), 0)::int AS "paidCents",
           (SELECT count(*)::int FROM subscriptions WHERE tenant_id = ${tenantId} AND status = 'past_due') AS "pastDue"
    FROM invoices WHERE tenant_id = ${tenantId}`.execute(db);
  return rows[0] as InvoiceCounts;
}
