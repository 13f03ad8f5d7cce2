/**
 * `engine.overview`: what the engine's own tables say about the last hour
 * or day, in time buckets, for a page people read at a glance (the
 * console's overview). Every figure is read in one read-only transaction,
 * so the charts agree with each other and with the counts of now.
 */
import { InvalidOptionError } from "../../errors.js";
import { OVERVIEW_OPTIONS } from "../../options/known-options.js";
import { checkOptions, describeValue } from "../../options/option-shape.js";
import type { InTransaction } from "../../store/executor.js";
import type { BucketCount, BucketWindow } from "../../store/overview.js";
import {
  readOneSnapshot,
  selectCurrentCounts,
  selectFinishedPerBucket,
  selectItemDurations,
  selectOutboxFlow,
  selectParkedSince,
  selectStartedPerBucket,
  selectStuckSince,
  selectWorkflowDurations,
} from "../../store/overview.js";
import type { RunOutcome, Tables } from "../../store/run-store.js";
import { databaseNow } from "../../store/schedules.js";

/** The span an overview covers, up to now: the last hour in 60 one-minute buckets, or the last day in 96 of 15 minutes. */
export type OverviewWindow = "hour" | "day";

/** Options of `engine.overview`. */
export interface OverviewOptions {
  /** `'hour'` or `'day'` (Default: `'hour'`). */
  window?: OverviewWindow;
}

/** The buckets of each window: how many, and how long each is. */
const WINDOWS: Record<OverviewWindow, { buckets: number; bucketMs: number }> = {
  hour: { buckets: 60, bucketMs: 60_000 },
  day: { buckets: 96, bucketMs: 15 * 60_000 },
};

/** p50, p95 and the longest of a group's durations, in ms, with how many there were. */
export interface DurationStats {
  readonly count: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly maxMs: number;
}

/** One item's durations (a phase, a step call, a sleep or a wait), with how many of its entries failed. */
export interface ItemDurationStats extends DurationStats {
  readonly workflow: string;
  readonly kind: "phase" | "step" | "sleep" | "wait";
  readonly name: string;
  readonly failed: number;
}

/**
 * The engine's tables over one window, on the database clock. Every series
 * has one number per bucket, oldest first, aligned with `buckets`.
 */
export interface Overview {
  readonly window: OverviewWindow;
  /** The database clock when read. */
  readonly now: Date;
  /** The start of each bucket; the last one holds `now`. */
  readonly buckets: readonly Date[];
  readonly bucketMs: number;
  /** Records created per bucket (claimed by `runOnce`, or enqueued, by a schedule too). */
  readonly started: readonly number[];
  /** Runs completed per bucket, by outcome; records already swept count through their tombstones. */
  readonly finished: Readonly<Record<RunOutcome, readonly number[]>>;
  /**
   * At the end of each bucket (or now, for the last): how many of the runs
   * parked now were parked by then. Unparked and canceled runs leave no
   * trace of having been parked, so earlier parkings that ended are not in it.
   */
  readonly parked: readonly number[];
  /** The same for the runs stuck now (in flight with an ended lease), by when their lease ended. */
  readonly stuck: readonly number[];
  /**
   * Undelivered outbox messages (pending or dead) at the end of each
   * bucket, from their write and delivery times; a delivered message the
   * sweep deleted is missing from the buckets before its delivery.
   */
  readonly outboxBacklog: readonly number[];
  /** Counts as they are now. */
  readonly current: {
    /** In flight with a live lease. */
    readonly inFlight: number;
    readonly stuck: number;
    readonly parked: number;
    readonly suspended: number;
    readonly outboxPending: number;
    readonly outboxDead: number;
  };
  /** Runs completed in the window (canceled ones left out), creation to completion, per workflow by name. */
  readonly workflowDurations: readonly (DurationStats & { readonly workflow: string })[];
  /** History entries ended in the window, per workflow and item, in the order the items run. */
  readonly itemDurations: readonly ItemDurationStats[];
}

/** Operator reads for the console's overview. */
export interface OverviewApi {
  /**
   * What the engine's tables say about the last hour (60 buckets of a
   * minute) or the last day (96 of 15 minutes): runs started and finished
   * per bucket by outcome, p50 and p95 durations per workflow and item,
   * the parked and stuck runs by when they stopped, the outbox backlog, and
   * the counts now. Read-only, in one transaction; it reads `runs` and
   * `run_history` whole (no index serves a time range across tenants), so
   * call it for a page, not in a loop.
   * @example
   * ```ts
   * const o = await engine.overview({ window: 'hour' })
   * console.log(o.started.reduce((a, b) => a + b, 0), 'runs started in the last hour;', o.current.stuck, 'stuck now')
   * ```
   * @throws InvalidOptionError (500) an unknown option, or a window other than 'hour' or 'day'.
   */
  overview(options?: OverviewOptions): Promise<Overview>;
}

/** The window's buckets: whole minutes (or quarters of an hour) ending with the one `now` is in. */
function windowAt(now: Date, window: OverviewWindow): BucketWindow & { count: number } {
  const { buckets, bucketMs } = WINDOWS[window];
  const to = (Math.floor(now.getTime() / bucketMs) + 1) * bucketMs;
  return { from: new Date(to - buckets * bucketMs), to: new Date(to), bucketMs, count: buckets };
}

/** Counts spread over `count` buckets (those outside the window dropped). */
function perBucket(rows: readonly BucketCount[], count: number): number[] {
  const out = new Array<number>(count).fill(0);
  for (const r of rows) if (r.i >= 0 && r.i < count) out[r.i] = (out[r.i] ?? 0) + r.n;
  return out;
}

/** Running totals from `start`: the value at the end of each bucket. */
function cumulative(start: number, steps: readonly number[]): number[] {
  let sum = start;
  return steps.map((n) => (sum += n));
}

/** The count of bucket -1 (before the window). */
const before = (rows: readonly BucketCount[]) => rows.filter((r) => r.i < 0).reduce((a, r) => a + r.n, 0);

function checkWindow(options: OverviewOptions | undefined): OverviewWindow {
  checkOptions("overview", OVERVIEW_OPTIONS, options);
  const window = options?.window ?? "hour";
  if (window !== "hour" && window !== "day") {
    throw new InvalidOptionError("window", `overview: window must be 'hour' or 'day', got ${describeValue(window)}`);
  }
  return window;
}

export function overviewApi(inTransaction: InTransaction, tables: Tables): OverviewApi {
  return {
    async overview(options) {
      const window = checkWindow(options);
      return inTransaction(async (tx) => {
        await readOneSnapshot(tx);
        const now = await databaseNow(tx);
        const w = windowAt(now, window);
        const started = await selectStartedPerBucket(tx, tables, w);
        const finished = await selectFinishedPerBucket(tx, tables, w);
        const parked = await selectParkedSince(tx, tables, w);
        const stuck = await selectStuckSince(tx, tables, w);
        const outbox = await selectOutboxFlow(tx, tables, w);
        const current = await selectCurrentCounts(tx, tables);
        const workflows = await selectWorkflowDurations(tx, tables, w);
        const items = await selectItemDurations(tx, tables, w);
        const outcome = (o: RunOutcome) =>
          perBucket(
            finished.filter((r) => r.outcome === o),
            w.count,
          );
        const written = perBucket(
          outbox.filter((r) => r.flow === "in"),
          w.count,
        );
        const delivered = perBucket(
          outbox.filter((r) => r.flow === "out"),
          w.count,
        );
        const stats = (r: { count: number; p50_ms: number; p95_ms: number; max_ms: number }) => ({
          count: r.count,
          p50Ms: r.p50_ms,
          p95Ms: r.p95_ms,
          maxMs: r.max_ms,
        });
        return Object.freeze({
          window,
          now,
          buckets: Array.from({ length: w.count }, (_, i) => new Date(w.from.getTime() + i * w.bucketMs)),
          bucketMs: w.bucketMs,
          started: perBucket(started, w.count),
          finished: {
            succeeded: outcome("succeeded"),
            failed: outcome("failed"),
            errored: outcome("errored"),
            canceled: outcome("canceled"),
          },
          parked: cumulative(before(parked), perBucket(parked, w.count)),
          stuck: cumulative(before(stuck), perBucket(stuck, w.count)),
          outboxBacklog: cumulative(
            before(outbox.filter((r) => r.flow === "before")),
            written.map((n, i) => n - (delivered[i] ?? 0)),
          ),
          current: {
            inFlight: current.in_flight,
            stuck: current.stuck,
            parked: current.parked,
            suspended: current.suspended,
            outboxPending: current.outbox_pending,
            outboxDead: current.outbox_dead,
          },
          workflowDurations: workflows.map((r) => ({ workflow: r.workflow, ...stats(r) })),
          itemDurations: items.map((r) => ({
            workflow: r.workflow,
            kind: r.kind,
            name: r.name,
            failed: r.failed,
            ...stats(r),
          })),
        });
      });
    },
  };
}
