/**
 * The reads behind the console's overview: runs started and finished per
 * time bucket, durations, the parked and stuck runs by when they stopped,
 * the outbox's flow, and the counts as they are now. Every statement is
 * read-only and reads the engine's own tables, nothing else; none is on the
 * hot path. The caller runs them in one read-only transaction, so they all
 * see one snapshot and one `now()`.
 *
 * A bucket is a number: `floor((instant - from) / bucketMs)`, 0 for the
 * oldest; -1 stands for "before the window" where a statement counts what
 * was already there when the window began.
 *
 * Cost: `runs.created_at`, `runs.completed_at` and `run_history` have no
 * index by time across tenants, so the started, finished and duration
 * statements read those tables whole (an operator's page, like `stats`);
 * the parked, stuck and outbox ones read their partial indexes.
 */

import type { Executor, RunOutcome, Tables } from "./run-store.js";
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";

/** The time buckets of one overview, on the database clock. */
export interface BucketWindow {
  /** Start of the oldest bucket. */
  readonly from: Date;
  /** End of the newest bucket (after `now()`: the newest bucket is the one now falls in). */
  readonly to: Date;
  readonly bucketMs: number;
}

/** A count in one bucket. */
export interface BucketCount {
  /** The bucket (0 the oldest); -1 before the window. */
  i: number;
  n: number;
}

/** The bucket `instant` falls in, counted from `w.from`. */
function bucketOf(instant: Sql<unknown>, w: BucketWindow): Sql<number> {
  return sql<number>`floor(extract(epoch FROM (${instant} - ${w.from}::timestamptz)) * 1000 / ${w.bucketMs}::float8)::int`;
}

/** `column` within the window. */
function inWindow(column: Sql<unknown>, w: BucketWindow): Sql<boolean> {
  return sql<boolean>`${column} >= ${w.from}::timestamptz AND ${column} < ${w.to}::timestamptz`;
}

/** Make `tx`, a transaction that ran nothing yet, a read-only snapshot: every read after it sees one moment. */
export async function readOneSnapshot(tx: Executor): Promise<void> {
  await sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.execute(tx);
}

/** Records created per bucket (a claim or an enqueue; every record of the window still in the table). */
export async function selectStartedPerBucket(db: Executor, t: Tables, w: BucketWindow): Promise<BucketCount[]> {
  const { rows } = await sql<BucketCount>`
    SELECT ${bucketOf(sql.id("created_at"), w)} AS i, count(*)::int AS n
    FROM ${t.runs}
    WHERE ${inWindow(sql.id("created_at"), w)}
    GROUP BY 1`.execute(db);
  return rows;
}

/** Completions per bucket and outcome. */
export interface FinishedCount extends BucketCount {
  outcome: RunOutcome;
}

/**
 * Completions per bucket and outcome: completed records, and the
 * tombstones of those already swept (a record and its tombstone never
 * both exist, so none is counted twice).
 */
export async function selectFinishedPerBucket(db: Executor, t: Tables, w: BucketWindow): Promise<FinishedCount[]> {
  const { rows } = await sql<FinishedCount>`
    SELECT ${bucketOf(sql.id("done", "completed_at"), w)} AS i, done.outcome, count(*)::int AS n
    FROM (
      SELECT completed_at, outcome FROM ${t.runs}
      WHERE status = 'completed' AND ${inWindow(sql.id("completed_at"), w)}
      UNION ALL
      SELECT completed_at, outcome FROM ${t.tombstones} WHERE ${inWindow(sql.id("completed_at"), w)}
    ) AS done
    GROUP BY 1, 2`.execute(db);
  return rows;
}

/**
 * The runs parked now, by the bucket they were parked in (-1: before the
 * window). Parking leaves no trace once a run is unparked or canceled, so
 * these are the runs still parked, not every run that was parked then.
 */
export async function selectParkedSince(db: Executor, t: Tables, w: BucketWindow): Promise<BucketCount[]> {
  const { rows } = await sql<BucketCount>`
    SELECT greatest(${bucketOf(sql.id("parked_at"), w)}, -1) AS i, count(*)::int AS n
    FROM ${t.runs}
    WHERE status = 'parked'
    GROUP BY 1`.execute(db);
  return rows;
}

/**
 * The runs stuck now (in flight, lease ended by `now()`), by the bucket
 * their lease ended in (-1: before the window): a run is stuck from its
 * lease's end until a takeover renews it, which leaves no trace either.
 */
export async function selectStuckSince(db: Executor, t: Tables, w: BucketWindow): Promise<BucketCount[]> {
  const { rows } = await sql<BucketCount>`
    SELECT greatest(${bucketOf(sql.id("locked_until"), w)}, -1) AS i, count(*)::int AS n
    FROM ${t.runs}
    WHERE status = 'in_flight' AND locked_until <= now()
    GROUP BY 1`.execute(db);
  return rows;
}

/** Outbox messages written (`in`) and delivered (`out`) per bucket; `before`: undelivered when the window began. */
export interface OutboxFlowCount extends BucketCount {
  flow: "in" | "out" | "before";
}

/**
 * The outbox's flow: undelivered messages (pending or dead) at the start of
 * the window, then per bucket the messages written and those delivered.
 * A delivered message the sweep deleted (`outboxRetentionMs`) counts in
 * neither.
 */
export async function selectOutboxFlow(db: Executor, t: Tables, w: BucketWindow): Promise<OutboxFlowCount[]> {
  const { rows } = await sql<OutboxFlowCount>`
    SELECT 'before' AS flow, -1 AS i, count(*)::int AS n FROM ${t.outbox}
    WHERE created_at < ${w.from}::timestamptz AND (delivered_at IS NULL OR delivered_at >= ${w.from}::timestamptz)
    UNION ALL
    SELECT 'in', ${bucketOf(sql.id("created_at"), w)}, count(*)::int FROM ${t.outbox}
    WHERE ${inWindow(sql.id("created_at"), w)}
    GROUP BY 2
    UNION ALL
    SELECT 'out', ${bucketOf(sql.id("delivered_at"), w)}, count(*)::int FROM ${t.outbox}
    WHERE status = 'delivered' AND ${inWindow(sql.id("delivered_at"), w)}
    GROUP BY 2`.execute(db);
  return rows;
}

/** How many runs and messages stand where, now. */
export interface CurrentCountsRow {
  in_flight: number;
  stuck: number;
  parked: number;
  suspended: number;
  outbox_pending: number;
  outbox_dead: number;
}

/** The counts as they are at `now()`, each from the partial index on its status. */
export async function selectCurrentCounts(db: Executor, t: Tables): Promise<CurrentCountsRow> {
  const { rows } = await sql<CurrentCountsRow>`
    SELECT
      (SELECT count(*)::int FROM ${t.runs} WHERE status = 'in_flight' AND locked_until > now()) AS in_flight,
      (SELECT count(*)::int FROM ${t.runs} WHERE status = 'in_flight' AND locked_until <= now()) AS stuck,
      (SELECT count(*)::int FROM ${t.runs} WHERE status = 'parked') AS parked,
      (SELECT count(*)::int FROM ${t.runs} WHERE status = 'suspended') AS suspended,
      (SELECT count(*)::int FROM ${t.outbox} WHERE status = 'pending') AS outbox_pending,
      (SELECT count(*)::int FROM ${t.outbox} WHERE status = 'dead') AS outbox_dead`.execute(db);
  return rows[0] as CurrentCountsRow;
}

/** Percentiles of one group's durations, in ms. */
export interface DurationRow {
  count: number;
  p50_ms: number;
  p95_ms: number;
  max_ms: number;
}

const PERCENTILES = (ms: Sql<unknown>) => sql`count(*)::int AS count,
  percentile_cont(0.5) WITHIN GROUP (ORDER BY ${ms})::float8 AS p50_ms,
  percentile_cont(0.95) WITHIN GROUP (ORDER BY ${ms})::float8 AS p95_ms,
  max(${ms})::float8 AS max_ms`;

/**
 * Durations of the runs completed in the window, creation to completion,
 * per workflow. A canceled run's time says when an operator stepped in,
 * not how long the workflow takes: those are left out.
 */
export async function selectWorkflowDurations(
  db: Executor,
  t: Tables,
  w: BucketWindow,
): Promise<(DurationRow & { workflow: string })[]> {
  const ms = sql`extract(epoch FROM (completed_at - created_at)) * 1000`;
  const { rows } = await sql<DurationRow & { workflow: string }>`
    SELECT workflow, ${PERCENTILES(ms)}
    FROM ${t.runs}
    WHERE status = 'completed' AND outcome <> 'canceled' AND ${inWindow(sql.id("completed_at"), w)}
    GROUP BY workflow
    ORDER BY workflow`.execute(db);
  return rows;
}

/** One item's durations; `failed` counts its entries that ended failed. */
export interface ItemDurationRow extends DurationRow {
  workflow: string;
  kind: "phase" | "step" | "sleep" | "wait";
  name: string;
  failed: number;
}

/**
 * Durations of the history entries (phase, step call, sleep, wait) that
 * ended in the window, per workflow and item, in the order the items run
 * (by their median start after the run's creation). An entry a takeover
 * interrupted, or one still open, has no duration and is left out.
 */
export async function selectItemDurations(db: Executor, t: Tables, w: BucketWindow): Promise<ItemDurationRow[]> {
  const ms = sql`extract(epoch FROM (h.finished_at - h.started_at)) * 1000`;
  const { rows } = await sql<ItemDurationRow>`
    SELECT r.workflow, h.kind, h.name, ${PERCENTILES(ms)},
           count(*) FILTER (WHERE h.outcome = 'failed')::int AS failed
    FROM ${t.history} AS h
    JOIN ${t.runs} AS r ON r.tenant_id = h.tenant_id AND r.key = h.key AND r.run_id = h.run_id
    WHERE h.outcome IN ('succeeded', 'failed', 'reconciled') AND ${inWindow(sql.id("h", "finished_at"), w)}
    GROUP BY r.workflow, h.kind, h.name
    ORDER BY r.workflow, percentile_cont(0.5) WITHIN GROUP (ORDER BY h.started_at - r.created_at), h.kind, h.name`.execute(
    db,
  );
  return rows;
}
