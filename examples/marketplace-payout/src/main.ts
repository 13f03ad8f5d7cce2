/**
 * The marketplace payout demo: three orders of two merchants, paid out to
 * twelve sellers.
 *
 * Each order's payout is one `payout_order` run, enqueued; a worker runs
 * it. It reads the order's lines and fans out one `seller_transfer` run
 * per seller with `.map`, then waits for them, holding nothing. Each
 * transfer goes to the (fake) payment provider with its step's derived
 * key, at most two at once per merchant account and under the provider's
 * rate limit, both enforced in the database for every process. The first
 * transfer to `sel_lost` loses its answer: the step asks again with the
 * same key, and the provider answers without paying twice. The run ends
 * with a table of counts and exits 1 if one is wrong.
 *
 * It runs on an in-memory PGlite of its own: nothing to set up.
 *
 *   pnpm start
 */
import { PGlite } from "@electric-sql/pglite";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { Kysely, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import type { Database } from "./marketplace-tables.js";
import { addOrders, createMarketplaceTables, payoutCounts } from "./marketplace-tables.js";
import { ORDERS, payoutKey, TENANT, totalCents } from "./orders.js";
import { PayoutProvider, PROVIDER_LIMIT } from "./payout-provider.js";
import { printSummary } from "./summary.js";
import type { PayoutWorkflows } from "./workflows.js";
import { payoutWorkflows, RATE_LIMITS, TRANSFERS_PER_MERCHANT } from "./workflows.js";

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

const euros = (cents: number) => (cents / 100).toFixed(2);

interface Demo {
  readonly db: Kysely<Database>;
  readonly pglite: PGlite;
  readonly engine: Engine;
  readonly flows: PayoutWorkflows;
  readonly provider: PayoutProvider;
}

/** What the story counted on its way. */
interface Tally {
  created: number;
  createdAgain: number;
  replayed: number;
}

async function story(demo: Demo): Promise<Tally> {
  const { engine, flows, db } = demo;
  const tally: Tally = { created: 0, createdAgain: 0, replayed: 0 };

  heading(1, "Three orders placed, each split between its sellers");
  for (const o of ORDERS) {
    const shares = o.lines.map((l) => `${l.sellerId} ${euros(l.amountCents)}`).join(", ");
    say(`${o.id} (merchant ${o.merchantId}): ${shares}`);
  }

  heading(2, "Each order's payout is enqueued; enqueued again, it is the same run");
  for (const o of ORDERS) {
    const res = await engine.enqueue(db, flows.payoutOrder, {
      tenantId: TENANT,
      key: payoutKey(o.id),
      input: { orderId: o.id },
    });
    if (res.created) tally.created++;
  }
  const first = ORDERS[0]?.id as string;
  const again = await engine.enqueue(db, flows.payoutOrder, {
    tenantId: TENANT,
    key: payoutKey(first),
    input: { orderId: first },
  });
  if (again.created) tally.createdAgain++;
  say(`${tally.created} payout runs created; ${payoutKey(first)} enqueued again: created ${again.created}`);

  heading(3, "A worker runs them: one child run per seller, then the order waits for its children");
  const worker = engine.startWorker({
    workflows: [flows.payoutOrder, flows.sellerTransfer],
    concurrency: 8,
    intervalMs: 100,
    listen: demo.pglite,
    onError: (error) => say(`worker: ${String(error)}`),
  });
  try {
    for (const o of ORDERS) {
      const res = await engine.wait(TENANT, payoutKey(o.id), { timeoutMs: 60_000 });
      expect(res.status === 200, `the payout of ${o.id} should answer 200, got ${res.status}`);
      const body = res.body as { transfers: { sellerId: string; transferId: string }[] };
      say(`${o.id}: ${body.transfers.map((t) => `${t.sellerId} ${t.transferId}`).join(", ")}`);
    }
  } finally {
    await worker.stop();
  }
  const record = await engine.inspect(TENANT, payoutKey(first));
  expect(record !== null && record.status === "completed", "the first payout should be completed");
  // Each child is a run of its own, linked to its parent both ways.
  const children = record.children ?? [];
  say(`${payoutKey(first)} has ${children.length} children, under keys derived from its own:`);
  for (const c of children) say(`  ${c.item}[${c.index}] ${c.key} (${c.workflow}, ${c.outcome})`);
  const child = children[0] ? await engine.inspect(TENANT, children[0].key) : null;
  expect(child !== null && child.status === "completed", "the first child should be completed");
  say(
    `and inspect on the first child names its parent: ${child.parent?.key}, ${child.parent?.item}[${child.parent?.index}]`,
  );
  const lost = demo.provider.counts.lostAnswers;
  say(`the provider lost ${lost} answer: the step asked again with the same key and got the same transfer back`);

  heading(4, "The payout asked for again: its stored answer, nothing paid twice");
  const replay = await engine.runOnce(flows.payoutOrder, {
    tenantId: TENANT,
    key: payoutKey(first),
    input: { orderId: first },
  });
  if (replay.replayed) tally.replayed++;
  say(`runOnce ${payoutKey(first)} -> ${replay.status}, replayed ${replay.replayed}`);
  return tally;
}

async function main(): Promise<boolean> {
  const pglite = await PGlite.create();
  const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
  try {
    const engine = createEngine({ db, rateLimits: RATE_LIMITS });
    await engine.migrate();
    await createMarketplaceTables(db);
    await addOrders(db, TENANT, ORDERS);
    const provider = new PayoutProvider();
    const flows = payoutWorkflows(provider);
    console.log("idempo marketplace payout demo on embedded PGlite, in memory");
    const tally = await story({ db, pglite, engine, flows, provider });
    const payouts = await payoutCounts(db, TENANT);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = ${TENANT} AND workflow = 'seller_transfer'`.execute(
      db,
    );
    const lines = ORDERS.reduce((n, o) => n + o.lines.length, 0);
    return printSummary([
      { what: "payout runs created (a second enqueue creates none)", expected: ORDERS.length, actual: tally.created },
      { what: "runs created by the second enqueue", expected: 0, actual: tally.createdAgain },
      { what: "seller_transfer children (one per seller and order)", expected: lines, actual: rows[0]?.n ?? 0 },
      { what: "transfer requests (a lost answer asked again)", expected: lines + 1, actual: provider.counts.requests },
      { what: "answers replayed for a known key", expected: 1, actual: provider.counts.replays },
      { what: "transfers made", expected: lines, actual: provider.counts.transfers },
      { what: "payouts recorded", expected: lines, actual: payouts.payouts },
      { what: "order lines without their payout", expected: 0, actual: payouts.missing },
      { what: "cents transferred", expected: totalCents(ORDERS), actual: provider.counts.transferredCents },
      { what: "cents on payouts", expected: totalCents(ORDERS), actual: payouts.paidOutCents },
      { what: "orders paid out", expected: ORDERS.length, actual: payouts.ordersPaidOut },
      { what: "payouts replayed to a retry", expected: 1, actual: tally.replayed },
      { what: "duplicate transfers", expected: 0, actual: provider.duplicateTransfers() },
      ...[...new Set(ORDERS.map((o) => o.merchantId))].map((m) => ({
        what: `most transfers at once for ${m}`,
        expected: TRANSFERS_PER_MERCHANT,
        actual: provider.mostInFlight(m),
        atMost: true,
      })),
      {
        what: `requests refused with 429 (the provider's own limit: ${PROVIDER_LIMIT.perSecond}/s)`,
        expected: 0,
        actual: provider.counts.refused,
      },
    ]);
  } finally {
    await db.destroy();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error(error instanceof DemoFailure ? `\nDEMO FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
