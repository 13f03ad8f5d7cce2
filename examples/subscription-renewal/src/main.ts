/**
 * The subscription renewal demo: three months of billing, simulated in a
 * few seconds.
 *
 * Each plan has a monthly schedule; each tick starts one run of
 * `bill_plan`, which enqueues a `renewal` run per active subscription. A
 * renewal charges the card with its derived key; a decline waits a day (a
 * durable sleep) and is retried once with a key of its own. The card
 * processor is a fake with deterministic test cards: one declines every
 * first try and pays the next day, one loses the answer to its first
 * charge (the step repeats the request with the same key, and the
 * processor answers without charging again), one has expired.
 *
 * Time is simulated: the demo creates the test clock of `@idempo/testing`
 * itself and moves the engine's time from tick to tick, and a day after
 * each, running in this process what becomes due. That is a test's tool
 * used on purpose, on an in-memory PGlite of the demo's own; a deployment
 * has no clock to set and runs workers (`engine.startWorker`) that fire
 * the ticks on the database's time. The run ends with a table of counts
 * and exits 1 if one is wrong.
 *
 *   pnpm start
 */
import { PGlite } from "@electric-sql/pglite";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import type { ClockReport, TestClock } from "@idempo/testing";
import { createTestClock } from "@idempo/testing";
import { Kysely } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import type { Database } from "./billing-tables.js";
import { addSubscribers, createBillingTables } from "./billing-tables.js";
import { CardProcessor } from "./card-processor.js";
import { registerPlanSchedules } from "./schedules.js";
import { invoiceCounts, nextTick, SUBSCRIBERS, TENANT } from "./simulation.js";
import { printSummary } from "./summary.js";
import type { BillingWorkflows } from "./workflows.js";
import { billingWorkflows, DAY_MS } from "./workflows.js";

const MONTHS = 3;

/** A step of the story did not go as described. */
class DemoFailure extends Error {}

function expect(condition: boolean, what: string): asserts condition {
  if (!condition) throw new DemoFailure(what);
}

function heading(n: number, text: string): void {
  console.log(`\n${n}. ${text}`);
}

function say(text: string): void {
  console.log(`   ${text}`);
}

const day = (at: Date) =>
  at.toLocaleDateString("en-GB", { day: "numeric", month: "long", year: "numeric", timeZone: "UTC" });
const euros = (cents: number) => (cents / 100).toFixed(2);

/** What the clock's reports add up to. */
interface Totals {
  ticks: number;
  planRuns: number;
  renewals: number;
  refired: number;
  /** Renewals resumed the day after a tick: the retries, woken from their sleep. */
  nextDay: number;
}

interface Demo {
  readonly db: Kysely<Database>;
  readonly engine: Engine;
  readonly flows: BillingWorkflows;
  readonly cards: CardProcessor;
  readonly clock: TestClock;
}

/** The period a month's ticks billed: the input of its `bill_plan` runs. */
async function periodOf(demo: Demo, report: ClockReport): Promise<{ key: string; period: string }> {
  const run = report.resumed.find((r) => r.workflow === "bill_plan");
  expect(run !== undefined, "each tick should start a bill_plan run");
  const input = (await demo.engine.inspect(TENANT, run.key))?.input as { period?: string } | undefined;
  expect(typeof input?.period === "string", "a bill_plan run should carry its period");
  return { key: run.key, period: input.period };
}

/** Each invoice of the period, one line per subscriber (with `retried`, only those retried). */
async function showInvoices(demo: Demo, period: string, retried = false): Promise<void> {
  const rows = await demo.db
    .selectFrom("invoices")
    .innerJoin("subscriptions", "subscriptions.id", "invoices.subscription_id")
    .select(["customer", "plan", "amount_cents", "invoices.status", "charge_id", "tries"])
    .where("invoices.tenant_id", "=", TENANT)
    .where("period", "=", period)
    .where("tries", ">=", retried ? 2 : 0)
    .orderBy("customer")
    .execute();
  for (const r of rows) {
    const how =
      r.status === "paid"
        ? `paid (${r.charge_id})${r.tries === 2 ? " on the retry" : ""}`
        : r.status === "failed"
          ? "declined again: invoice failed, subscription past due"
          : "declined: the run sleeps for a day (one row with a wake-up time), then retries";
    say(`${r.customer.padEnd(6)} ${r.plan.padEnd(6)} ${euros(r.amount_cents).padStart(6)}  ${how}`);
  }
}

/** One month: the tick, what it billed, the re-fired tick, and the retries the day after. */
async function month(demo: Demo, n: number): Promise<Totals> {
  const { engine, flows, cards, clock } = demo;
  const requestsBefore = cards.counts.requests;
  const lostBefore = cards.counts.lostAnswers;
  const tick = await nextTick(clock, engine, demo.db);
  const { key, period } = await periodOf(demo, tick.report);
  const plans = tick.report.resumed.filter((r) => r.workflow === "bill_plan").length;
  heading(n, `${day(tick.at)}, midnight UTC: the plans' ticks`);
  say(`ticks fired: ${tick.report.ticks}; bill_plan runs: ${plans}, each enqueued a renewal per active subscription`);
  await showInvoices(demo, period);
  const lost = cards.counts.lostAnswers - lostBefore;
  if (lost > 0) say(`the processor lost ${lost} answer: the step asked again with the same key and got it back`);

  // A tick fired twice (a process with a stale definition, say) names the same run: nothing happens.
  const input = (await engine.inspect(TENANT, key))?.input as { plan: "basic" | "pro"; period: string };
  const { created } = await engine.enqueue(demo.db, flows.billPlan, { tenantId: TENANT, key, input });
  say(`the ${input.plan} tick fired again, under its run's key: created ${created}, nothing billed twice`);

  const after = await clock.advance(DAY_MS);
  const retries = after.resumed.filter((r) => r.workflow === "renewal").length;
  say(
    `${day(new Date(tick.at.getTime() + DAY_MS))}: ${retries} renewal${retries === 1 ? "" : "s"} woke up and retried`,
  );
  await showInvoices(demo, period, true);
  say(`charge requests this month: ${cards.counts.requests - requestsBefore}`);

  const totals = { ticks: 0, planRuns: 0, renewals: 0, refired: created ? 1 : 0, nextDay: retries };
  for (const report of [tick.report, after]) {
    expect(report.failed.length === 0 && report.tickErrors.length === 0, "no run or tick should fail");
    totals.ticks += report.ticks;
    totals.planRuns += report.resumed.filter((r) => r.workflow === "bill_plan" && r.status === 200).length;
    totals.renewals += report.resumed.filter((r) => r.workflow === "renewal" && r.outcome !== "suspended").length;
  }
  return totals;
}

async function story(demo: Demo): Promise<Totals> {
  const { engine, flows } = demo;
  heading(1, "One monthly schedule per plan, registered at start-up");
  const records = await registerPlanSchedules(engine, flows, TENANT);
  for (const r of records) say(`${r.name}: '${r.cron}' (${r.timezone}), next tick ${r.nextTickAt?.toISOString()}`);
  const again = await registerPlanSchedules(engine, flows, TENANT);
  expect(
    again.every((r, i) => r.nextTickAt?.getTime() === records[i]?.nextTickAt?.getTime()),
    "registering the same schedules again should keep their next ticks",
  );
  say("registered again, as a second process does at its start-up: the next ticks stay where they were");
  say(`subscribers: ${SUBSCRIBERS.map((s) => `${s.customer} (${s.plan}, ${s.card})`).join(", ")}`);

  const totals: Totals = { ticks: 0, planRuns: 0, renewals: 0, refired: 0, nextDay: 0 };
  for (let m = 0; m < MONTHS; m++) {
    const t = await month(demo, m + 2);
    for (const k of Object.keys(totals) as (keyof Totals)[]) totals[k] += t[k];
  }
  return totals;
}

async function main(): Promise<boolean> {
  // Always an in-memory PGlite of its own: the clock moves every instant in the engine's schema.
  const database = new Kysely<Database>({ dialect: new PGliteDialect(await PGlite.create()) });
  try {
    const engine = createEngine({ db: database });
    await engine.migrate();
    await createBillingTables(database);
    await addSubscribers(database, TENANT, SUBSCRIBERS);
    const cards = new CardProcessor();
    const flows = billingWorkflows(engine, cards);
    // The simulation's clock: it exists because this demo creates it, as a test would.
    const clock = createTestClock(engine, { workflows: [flows.billPlan, flows.renewal] });
    console.log(`idempo subscription renewal demo on embedded PGlite, in memory; ${MONTHS} months simulated`);
    const totals = await story({ db: database, engine, flows, cards, clock });
    const invoices = await invoiceCounts(database, TENANT);
    console.log(`\nThe clock moved the engine's time ${Math.round(clock.advancedMs / 86_400_000)} days forward.`);
    return printSummary([
      { what: "schedule ticks fired (2 plans x 3 months)", expected: 6, actual: totals.ticks },
      { what: "bill_plan runs (one per tick)", expected: 6, actual: totals.planRuns },
      { what: "runs created by a tick fired again", expected: 0, actual: totals.refired },
      { what: "renewal runs completed", expected: 10, actual: totals.renewals },
      { what: "renewals paid on the first try", expected: 6, actual: invoices.paidFirstTry },
      { what: "declines retried", expected: 4, actual: invoices.retried },
      { what: "retries run the day after the tick", expected: 4, actual: totals.nextDay },
      { what: "renewals paid on the retry", expected: 3, actual: invoices.paidOnRetry },
      { what: "renewals failed on the retry too", expected: 1, actual: invoices.failed },
      { what: "subscriptions past due (not billed again)", expected: 1, actual: invoices.pastDue },
      { what: "charge requests (a lost answer asked again)", expected: 15, actual: cards.counts.requests },
      { what: "answers replayed for a known key", expected: 1, actual: cards.counts.replays },
      { what: "charges made", expected: 9, actual: cards.counts.charges },
      { what: "cents charged", expected: 14_100, actual: cards.counts.chargedCents },
      { what: "cents on paid invoices", expected: 14_100, actual: invoices.paidCents },
      { what: "duplicate charges", expected: 0, actual: cards.duplicateCharges() },
    ]);
  } finally {
    await database.destroy();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error(error instanceof DemoFailure ? `\nDEMO FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
