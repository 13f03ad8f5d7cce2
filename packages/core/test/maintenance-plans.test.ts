import type { CompiledQuery } from "kysely";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { selectDueRuns } from "../src/store/due-runs.ts";
import { claimDue } from "../src/store/outbox.ts";
import { tablesIn } from "../src/store/run-store.ts";
import { selectDueSchedules } from "../src/store/schedules.ts";
import { useTestDatabase } from "./support/db.ts";
import { executorOf } from "./support/executor.ts";

// The maintenance statements (sweep, stale-run discovery, `keys stuck`, the
// relay's claim, stats) must be driven by an index, so their cost follows the
// rows they find and not the size of the table. The SQL is captured from the
// engine as it sends it (never retyped here), then EXPLAINed with the same
// parameters on a table seeded large enough that a sequential scan would be
// the planner's choice if the statement gave it no index to use.
const t = useTestDatabase();
let captured: CompiledQuery[] = [];
let db: Kysely<unknown>;
let explainer: pg.Client;

const COMPLETED = 100_000;
const IN_FLIGHT = 3_000;
const STUCK = 20;
const EXPIRED = 20;
const DELIVERED = 50_000;
const WAITING = 20_000;
const TOMBSTONES = 100_000;
const BURIED_PAST = 20;

beforeAll(async () => {
  const seed = t.db;
  // Generated, not run through the engine: 100 tenants, five workflows.
  await sql`
    INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint, input,
                             status, owner_token, locked_until, retention_ms, outcome, response_status,
                             response_body, expires_at, created_at, completed_at)
    SELECT 't' || (g % 100), 'k' || g, 'r' || g, 'w' || (g % 5), '["phase:a"]', 'h', 'f', '{}',
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN 'completed' ELSE 'in_flight' END,
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN NULL ELSE 'o' || g END,
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN NULL
                WHEN g <= ${COMPLETED + EXPIRED + STUCK} THEN now() - interval '1 hour'
                ELSE now() + interval '1 hour' END,
           86400000,
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN 'succeeded' END,
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN 201 END,
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN '{"ok":true}'::json END,
           CASE WHEN g <= ${EXPIRED} THEN now() - interval '1 minute'
                WHEN g <= ${COMPLETED + EXPIRED} THEN now() + interval '1 day' END,
           now() - g * interval '1 second',
           CASE WHEN g <= ${COMPLETED + EXPIRED} THEN now() END
    FROM generate_series(1, ${COMPLETED + EXPIRED + STUCK + IN_FLIGHT}) g
  `.execute(seed);
  await sql`
    INSERT INTO idempo.run_history (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at)
    SELECT tenant_id, key, run_id, 'e', 'phase', 'a', 1, 'succeeded', created_at FROM idempo.runs
  `.execute(seed);
  // Recently delivered messages (kept by the outbox sweep), messages waiting
  // for a retry later, and a few that are due now.
  await sql`
    INSERT INTO idempo.outbox (tenant_id, message_id, key, run_id, topic, payload, delivery_key, status, attempts,
                               available_at, delivered_at)
    SELECT 't' || (g % 100), 'm' || g, 'k' || g, 'r' || g, 'mail', '{}', 'd' || g,
           CASE WHEN g <= ${DELIVERED} THEN 'delivered' ELSE 'pending' END,
           1,
           CASE WHEN g <= ${DELIVERED + WAITING} THEN now() + interval '1 hour' ELSE now() - interval '1 second' END,
           CASE WHEN g <= ${DELIVERED} THEN now() END
    FROM generate_series(1, ${DELIVERED + WAITING + 10}) g
  `.execute(seed);
  // Tombstones still in force, and a few past their time.
  await sql`
    INSERT INTO idempo.tombstones (completed_at, expired_at, kept_until, tenant_id, key_digest, workflow, outcome,
                                   fingerprint)
    SELECT now() - interval '2 days', now() - interval '1 day',
           CASE WHEN g <= ${BURIED_PAST} THEN now() - interval '1 minute' ELSE now() + interval '1 hour' + g * interval '1 second' END,
           't' || (g % 100), idempo.key_digest('gone' || g), 'w' || (g % 5), 'succeeded', sha256(int4send(g))
    FROM generate_series(1, ${TOMBSTONES}) g
  `.execute(seed);
  await sql`VACUUM ANALYZE idempo.runs, idempo.run_history, idempo.outbox, idempo.tombstones`.execute(seed);

  db = new Kysely({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: t.url, max: 2 }) }),
    log: (event) => {
      if (event.level === "query") captured.push(event.query);
    },
  });
  explainer = new pg.Client({ connectionString: t.url });
  await explainer.connect();
});

afterAll(async () => {
  await explainer?.end();
  await db?.destroy();
});

/** The statements `fn` sent, in order. */
async function capture(fn: () => Promise<unknown>): Promise<CompiledQuery[]> {
  captured = [];
  await fn();
  return captured;
}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * The plan's scans of idempo's tables, as "Node Type on relation (index)
 * [index condition]". The condition matters: an index read from end to end
 * with the time compared in a filter still costs the whole index.
 */
async function scans(query: CompiledQuery): Promise<string[]> {
  const { rows } = await explainer.query<{ "QUERY PLAN": { Plan: PlanNode }[] }>(
    `EXPLAIN (FORMAT JSON) ${query.sql}`,
    query.parameters as unknown[],
  );
  const plan = rows[0]?.["QUERY PLAN"][0]?.Plan;
  if (!plan) throw new Error("EXPLAIN returned no plan");
  return nodes(plan)
    .filter((n) => /Scan/.test(n["Node Type"]) && n["Node Type"] !== "CTE Scan" && n["Node Type"] !== "Subquery Scan")
    .map((n) => {
      const index = n["Index Name"] ? ` (${n["Index Name"]})` : "";
      return `${n["Node Type"]} on ${n["Relation Name"] ?? "?"}${index}${n["Index Cond"] ? ` [${n["Index Cond"]}]` : ""}`;
    });
}

function only(queries: CompiledQuery[], pattern: RegExp): CompiledQuery {
  const matching = queries.filter((q) => pattern.test(q.sql));
  expect(matching).toHaveLength(1);
  return matching[0] as CompiledQuery;
}

/** No sequential scan, and `index` is entered through a condition on `column` (not read whole). */
function expectIndexDriven(found: string[], index: string, column: string): void {
  expect(found.filter((s) => s.startsWith("Seq Scan"))).toEqual([]);
  expect(found.filter((s) => s.includes(`(${index}) [`) && s.includes(`(${column} <=`))).toHaveLength(1);
}

describe("maintenance statements are driven by an index, not a sequential scan", () => {
  it("sweep with nothing but a few records expired reads the expiry index", async () => {
    const engine = createEngine({ db });
    const sent = await capture(() => engine.sweep());
    const records = only(sent, /DELETE FROM "idempo"\."runs"/);
    const found = await scans(records);
    expectIndexDriven(found, "runs_completed_expires_at", "expires_at");
    // The history rows of the swept records are found by primary key.
    expect(found.some((s) => s.startsWith("Index Scan on run_history (run_history_pkey)"))).toBe(true);
    expectIndexDriven(await scans(only(sent, /DELETE FROM "idempo"\."outbox"/)), "outbox_delivered_at", "delivered_at");
    // The swept records' tombstones are written by primary key, never by reading the tombstones.
    expect(String(records.sql)).toMatch(/INSERT INTO "idempo"\."tombstones"/);
    expect(found.filter((s) => s.includes("on tombstones"))).toEqual([]);
    // Tombstones past their time are read from their own time index.
    const buried = only(sent, /DELETE FROM "idempo"\."tombstones"/);
    expectIndexDriven(await scans(buried), "tombstones_kept_until", "kept_until");
    const { rows } = await explainer.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM idempo.tombstones WHERE kept_until <= now()",
    );
    expect(rows[0]?.n).toBe(0);
  });

  it("stale-run discovery reads the in-flight lease index", async () => {
    const engine = createEngine({ db });
    const none = workflow("w_not_present")
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: {} }));
    const sent = await capture(() => engine.resumeStale({ workflows: [none] }));
    expect(sent).toHaveLength(1);
    expectIndexDriven(await scans(sent[0] as CompiledQuery), "runs_in_flight_locked_until", "locked_until");
  });

  it("keys stuck reads the in-flight lease index, across tenants and within one", async () => {
    const engine = createEngine({ db });
    for (const filter of [{}, { tenantId: "t3" }, { workflow: "w2" }]) {
      const sent = await capture(() => engine.listKeys({ ...filter, stuck: true }));
      expect(sent).toHaveLength(1);
      expectIndexDriven(await scans(sent[0] as CompiledQuery), "runs_in_flight_locked_until", "locked_until");
    }
    const page = await engine.listKeys({ stuck: true, limit: 1000 });
    expect(page.items).toHaveLength(STUCK);
  });

  it("the relay's claim reads the pending-message index", async () => {
    const sent = await capture(() => claimDue(executorOf(db), tablesIn("idempo"), ["mail"], 5, 30_000));
    expect(sent).toHaveLength(1);
    expectIndexDriven(await scans(sent[0] as CompiledQuery), "outbox_pending_available_at", "available_at");
  });

  it("stats: stuck and expired counts from the partial indexes, one pass for the unfiltered totals", async () => {
    const engine = createEngine({ db });
    let stats: Awaited<ReturnType<typeof engine.stats>> = [];
    const sent = await capture(async () => {
      stats = await engine.stats();
    });
    expect(sent).toHaveLength(1);
    const found = await scans(sent[0] as CompiledQuery);
    // Counting every record reads every record; that pass is the only one
    // allowed to be sequential.
    expect(found.filter((s) => s.startsWith("Seq Scan"))).toEqual(["Seq Scan on runs"]);
    expect(found.some((s) => s.includes("(runs_in_flight_locked_until) [(locked_until <="))).toBe(true);
    expect(found.some((s) => s.includes("(runs_completed_expires_at) [(expires_at <="))).toBe(true);
    // And the counts are still right (the sweep above removed the expired ones).
    expect(stats.reduce((n, s) => n + s.stuck, 0)).toBe(STUCK);
    expect(stats.filter((s) => s.status === "in_flight").reduce((n, s) => n + s.records, 0)).toBe(STUCK + IN_FLIGHT);
    expect(stats.reduce((n, s) => n + s.expired, 0)).toBe(0);
  });

  it("a worker's look for due runs, by priority and past runs over their limit, reads the suspended-runs indexes", async () => {
    // Many sleeping runs, some with a priority, a handful due: the selection's cost follows the due ones.
    await sql`
      INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint, input,
                               status, retention_ms, wake_at, wait_kind, wait_name, priority)
      SELECT 't' || (g % 100), 'sleep' || g, 'sr' || g, 'w' || (g % 5), '["sleep:a"]', 'h', 'f', '{}', 'suspended',
             86400000,
             CASE WHEN g <= 6 THEN now() - interval '1 second' ELSE now() + interval '1 hour' + g * interval '1 second' END,
             'sleep', 'a', CASE WHEN g % 10 = 0 THEN g % 7 END
      FROM generate_series(1, 30000) g`.execute(t.db);
    await sql`VACUUM ANALYZE idempo.runs`.execute(t.db);
    let due: string[] = [];
    const sent = await capture(async () => {
      due = (
        await selectDueRuns(executorOf(db), tablesIn("idempo"), ["w0", "w1", "w2", "w3", "w4"], 50, [0, 0, 1, 0, 0])
      ).map((r) => r.key);
    });
    expect(sent).toHaveLength(1);
    const found = await scans(sent[0] as CompiledQuery);
    // Both looks (oldest due, and due with a priority) go through a suspended-runs index, never the table.
    expect(found.filter((s) => s.startsWith("Seq Scan"))).toEqual([]);
    expect(found.filter((s) => s.includes("(runs_suspended_wake_at) [(wake_at <="))).not.toHaveLength(0);
    expect(found.every((s) => /\(runs_suspended_(wake_at|priority)\)/.test(s))).toBe(true);
    expect(due.sort()).toEqual(["sleep1", "sleep2", "sleep3", "sleep4", "sleep5", "sleep6"]);
  });

  it("a worker's look for due schedule ticks reads the due-schedule index", async () => {
    // Many schedules, a handful due: the firing round's cost follows the due ones.
    await sql`
      INSERT INTO idempo.schedules (name, tenant_id, workflow, cron, timezone, catch_up, grace_ms, has_input, next_tick_at)
      SELECT 's' || g, 't' || (g % 100), 'w' || (g % 5), '0 * * * *', 'UTC', 'latest', 60000, g % 2 = 0,
             CASE WHEN g <= 5 THEN now() - interval '1 second' ELSE now() + interval '1 hour' + g * interval '1 second' END
      FROM generate_series(1, 20000) g`.execute(t.db);
    await sql`VACUUM ANALYZE idempo.schedules`.execute(t.db);
    const filter = { registered: [{ name: "s2", workflow: "w2", hasInput: true }], workflows: ["w1", "w3"] };
    let due: string[] = [];
    const sent = await capture(async () => {
      due = await selectDueSchedules(executorOf(db), tablesIn("idempo"), filter, 50);
    });
    expect(sent).toHaveLength(1);
    expectIndexDriven(await scans(sent[0] as CompiledQuery), "schedules_due", "next_tick_at");
    // s1 and s3 (no input function, workflows w1 and w3) and s2 (registered with its function); not s4 or s5.
    expect(due.sort()).toEqual(["s1", "s2", "s3"]);
  });
});
