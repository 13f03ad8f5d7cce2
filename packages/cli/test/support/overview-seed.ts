/**
 * A shop's last day, for the overview and schedules pages: every run is
 * made by the engine (checkouts, fulfilments whose shipping takes 20-200 ms,
 * refunds some of which are refused, runs that park, crash or sleep, a
 * canceled one), the outbox is delivered by a real relay (two dead
 * letters), and a worker fires the schedules' missed ticks. Then each run's
 * stored instants are moved back by its age in the plan, as the test clock
 * does for a whole schema, so the runs spread over the hour and the day
 * (the last four checkouts come after the relay stopped: a fresh backlog,
 * and a receiver outage 24 to 32 minutes ago delays some deliveries).
 */
import type { Engine, Workflow } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import type { Kysely } from "kysely";
import { sql } from "kysely";
import { checkout } from "../fixtures/checkout-workflow.ts";
import { payment, trial } from "../fixtures/durable-workflows.ts";
import { fulfilment, poison, refund, report } from "../fixtures/shop-workflows.ts";

// biome-ignore lint/suspicious/noExplicitAny: the test database has no typed tables
type Db = Kysely<any>;
const MIN = 60_000;
const HOUR = 60 * MIN;

/** What the seed leaves, for the verdicts (the schedules' tick runs come on top of the started and succeeded). */
export const SHOP = {
  /** Refunds refused in the last hour and in the day. */
  failedInHour: 2,
  failedInDay: 3,
  canceled: 1,
  parked: 3,
  stuck: 2,
  /** Two trials asleep, one payment waiting for its signal. */
  suspended: 3,
  outboxPending: 4,
  outboxDead: 2,
} as const;

interface Planned {
  readonly wf: Workflow<unknown, unknown>;
  readonly tenantId: string;
  readonly key: string;
  readonly input: unknown;
  readonly ageMs: number;
}

/** The runs, oldest last; ages are within the hour (< 58 min) or the day (< 23 h). */
function plan(): Planned[] {
  const runs: Planned[] = [];
  const add = (wf: Workflow<unknown, unknown>, key: string, input: unknown, ageMs: number, tenantId = "acme") =>
    runs.push({ wf, tenantId, key, input, ageMs: Math.round(ageMs) });
  for (let i = 0; i < 30; i++)
    add(
      checkout,
      `order-${1100 + i}`,
      { amountCents: 500 + i * 37 },
      (2 + i * 1.85) * MIN,
      i % 4 === 3 ? "globex" : "acme",
    );
  for (let i = 0; i < 14; i++) add(fulfilment, `ship-${200 + i}`, { ms: 20 + ((i * 47) % 160) }, (3 + i * 3.9) * MIN);
  for (const [i, m] of [6, 17, 29, 38, 50].entries())
    add(refund, `refund-${40 + i}`, { ms: 40 + i * 25, late: i % 2 === 1 }, m * MIN);
  for (let i = 0; i < 36; i++)
    add(
      checkout,
      `order-${900 + i}`,
      { amountCents: 700 + i * 11 },
      (1.5 + i * 0.57) * HOUR,
      i % 3 === 0 ? "globex" : "acme",
    );
  for (let i = 0; i < 12; i++) add(fulfilment, `ship-${100 + i}`, { ms: 30 + ((i * 37) % 200) }, (2 + i * 1.7) * HOUR);
  for (const [i, h] of [3, 8, 13, 19].entries())
    add(refund, `refund-${30 + i}`, { ms: 60 + i * 20, late: i === 2 }, h * HOUR);
  return runs;
}

/** Move the stored instants of each run (its record, history, outbox messages and signals) back by its age. */
async function age(db: Db, moves: readonly { tenantId: string; key: string; ageMs: number }[]): Promise<void> {
  const m = sql`unnest(${moves.map((x) => x.tenantId)}::text[], ${moves.map((x) => x.key)}::text[],
    ${moves.map((x) => x.ageMs)}::float8[]) AS m (tenant_id, key, ms)`;
  const back = (table: string, columns: string[]) => {
    const sets = columns.map((c) => sql`${sql.id(c)} = t.${sql.id(c)} - m.ms * interval '1 millisecond'`);
    return sql`UPDATE ${sql.id("idempo", table)} AS t SET ${sql.join(sets)} FROM ${m}
      WHERE t.tenant_id = m.tenant_id AND t.key = m.key`.execute(db);
  };
  await back("runs", [
    "locked_until",
    "expires_at",
    "created_at",
    "updated_at",
    "completed_at",
    "parked_at",
    "wake_at",
    "wait_until",
  ]);
  await back("run_history", ["started_at", "finished_at"]);
  await back("outbox", ["available_at", "locked_until", "created_at", "delivered_at"]);
  await back("signals", ["created_at"]);
}

async function crash(engine: Engine, tenantId: string, key: string): Promise<void> {
  setFaultHook(engine, (p) => {
    if (p === "called:step:charge") throw new CrashSignal(p);
  });
  await engine.runOnce(checkout, { tenantId, key, input: { amountCents: 990 } }).catch((e: unknown) => {
    if (!(e instanceof CrashSignal)) throw e;
  });
  setFaultHook(engine, undefined);
  await engine.release(tenantId, key); // its process is gone: stuck from now on
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`seed: ${what} did not happen`);
}

/** Schedules, with their missed ticks fired by a worker, and each tick's run moved back to its tick. */
async function schedules(engine: Engine, db: Db): Promise<void> {
  await engine.schedule("sync-every-5m", { cron: "*/5 * * * *", workflow: report, tenantId: "acme", catchUp: "all" });
  await engine.schedule("hourly-digest", { cron: "0 * * * *", workflow: report, tenantId: "acme" });
  await engine.schedule("nightly-invoices", {
    cron: "0 2 * * *",
    timezone: "Europe/Berlin",
    workflow: report,
    tenantId: "acme",
  });
  await engine.schedule("heartbeat", { cron: "* * * * *", workflow: report, tenantId: "ops", catchUp: "none" });
  await engine.schedule("weekly-cleanup", { cron: "0 4 * * 0", workflow: report, tenantId: "ops" });
  await engine.pauseSchedule("weekly-cleanup");
  await sql`UPDATE idempo.schedules SET created_at = now() - interval '2 days',
    next_tick_at = CASE name WHEN 'sync-every-5m' THEN date_bin('5 minutes', now(), '2000-01-01') - interval '40 minutes'
                             ELSE date_trunc('hour', now()) - interval '3 hours' END
    WHERE name IN ('sync-every-5m', 'hourly-digest')`.execute(db);
  const worker = engine.startWorker({ workflows: [report], sweep: false, intervalMs: 100 });
  try {
    await until(async () => {
      const all = await engine.listSchedules();
      const { items } = await engine.listKeys({ workflow: "report", status: "suspended" });
      return items.length === 0 && all.every((s) => s.paused || (s.nextTickAt ?? new Date(0)) > new Date());
    }, "the missed ticks' runs");
  } finally {
    await worker.stop();
  }
  const { rows } = await sql<{ tenant_id: string; key: string; age_ms: number }>`
    SELECT tenant_id, key, extract(epoch FROM now() - substring(key from '^schedule:[^:]+:(.*)$')::timestamptz)::float8 * 1000 AS age_ms
    FROM idempo.runs WHERE key LIKE 'schedule:%'`.execute(db);
  await age(
    db,
    rows.map((r) => ({ tenantId: r.tenant_id, key: r.key, ageMs: Math.max(0, r.age_ms) })),
  );
}

/** Seed `db` (migrated, empty) as described above. */
export async function seedShop(db: Db): Promise<void> {
  const engine = createEngine({ db });
  const planned = plan();
  // Five at a time: the shipping and refund calls wait, the database does not.
  for (let i = 0; i < planned.length; i += 5) {
    await Promise.all(
      planned.slice(i, i + 5).map((p) => engine.runOnce(p.wf, { tenantId: p.tenantId, key: p.key, input: p.input })),
    );
  }
  const extra: { tenantId: string; key: string; ageMs: number }[] = [];
  for (const [key, ageMs] of [
    ["import-77", 41 * MIN],
    ["import-78", 13 * MIN],
    ["import-61", 9 * HOUR],
  ] as const) {
    await engine.runOnce(poison, { tenantId: "acme", key, input: {} }).catch(() => undefined);
    extra.push({ tenantId: "acme", key, ageMs });
  }
  for (const [key, ageMs] of [
    ["order-1201", 27 * MIN],
    ["order-1202", 8 * MIN],
  ] as const) {
    await crash(engine, "globex", key);
    extra.push({ tenantId: "globex", key, ageMs });
  }
  for (const [key, ageMs] of [
    ["trial-7", 33 * MIN],
    ["trial-8", 4 * MIN],
  ] as const) {
    await engine.runOnce(trial, { tenantId: "acme", key, input: { sleepMs: 3 * HOUR } });
    extra.push({ tenantId: "acme", key, ageMs });
  }
  for (const [key, ageMs] of [
    ["pay-31", 21 * MIN],
    ["pay-32", 9 * MIN],
  ] as const) {
    await engine.runOnce(payment, { tenantId: "globex", key, input: {} });
    extra.push({ tenantId: "globex", key, ageMs });
  }
  await engine.cancel("globex", "pay-31");
  // The relay delivers every receipt, but two that the receiver refuses for good (dead letters).
  const refused = new Set(["ord_order-1111", "ord_order-1123"]);
  const relay = engine.startRelay({
    maxAttempts: 1,
    pollIntervalMs: 50,
    handlers: {
      "receipt.email": async (message) => {
        const { orderId } = message.payload as { orderId: string };
        if (refused.has(orderId)) throw new Error("receiver answered 410 Gone: unknown mailbox");
      },
    },
  });
  try {
    await until(async () => (await engine.listOutbox({ status: "pending" })).length === 0, "the relay's deliveries");
  } finally {
    await relay.stop();
  }
  for (const [i, ageMs] of [0.3, 0.8, 1.2, 1.6].entries()) {
    const key = `order-${1300 + i}`;
    await engine.runOnce(checkout, { tenantId: "acme", key, input: { amountCents: 1500 } });
    extra.push({ tenantId: "acme", key, ageMs: ageMs * MIN });
  }
  await age(db, [...planned, ...extra]);
  // A receiver outage: the receipts written 24-32 minutes ago went out 23 minutes ago.
  await sql`UPDATE idempo.outbox SET delivered_at = now() - interval '23 minutes'
    WHERE status = 'delivered' AND created_at BETWEEN now() - interval '32 minutes' AND now() - interval '24 minutes'`.execute(
    db,
  );
  await schedules(engine, db);
}
