/**
 * The worker's loop over due suspended runs: fill free slots with due runs,
 * fairly across tenants and within per-workflow limits, and sleep until a
 * NOTIFY, a freed slot, the next known wake-up time or the poll interval.
 * Taking and executing a run is the engine's; this file only schedules.
 */
import type { DueRun } from "../../store/due-runs.js";
import { DUE_CHANNEL } from "../../store/notify-channels.js";
import type { NotificationSource } from "./notifications.js";
import { PollingLoop } from "./polling-loop.js";

export interface DueLoopOptions {
  readonly workflows: readonly string[];
  readonly concurrency: number;
  /** Per-workflow limit of runs executing at once in this loop. */
  readonly limits: ReadonlyMap<string, number>;
  readonly pollMs: number;
  readonly listen: NotificationSource | undefined;
  readonly listenCheckMs: number;
  readonly answerTimeoutMs: number;
}

export interface DueLoopOps {
  /** Candidates, each tenant's oldest first (see `selectDueRuns`). */
  select(workflows: readonly string[], limit: number): Promise<DueRun[]>;
  /**
   * Ms until the next wake-up time among these workflows, or null; a run
   * that became due in the last `lookbackMs` (since the round's `select`)
   * counts, as 1 ms.
   */
  nextWakeInMs(workflows: readonly string[], lookbackMs: number): Promise<number | null>;
  /** Take the run and execute it; resolves when it is done (or was taken by another). */
  execute(run: DueRun): Promise<void>;
  onError(error: unknown): void;
  /** LISTEN is back after a reported loss. */
  onListenBack(): void;
}

/** Candidates read per free slot: enough that every tenant's oldest run is among them in most rounds. */
const CANDIDATES_PER_SLOT = 8;
/** Tenants remembered for fairness; past it the memory starts afresh. */
const MEMORY = 10_000;

/** Starts the loop; `wake()` makes it look for due runs now (runs created in this process). */
export function startDueLoop(options: DueLoopOptions, ops: DueLoopOps): { stop(): Promise<void>; wake(): void } {
  const loop = new PollingLoop({
    concurrency: options.concurrency,
    pollMs: options.pollMs,
    listen: options.listen,
    listenCheckMs: options.listenCheckMs,
    answerTimeoutMs: options.answerTimeoutMs,
    at: "startWorker",
    channel: DUE_CHANNEL,
    listener: "worker",
    onError: ops.onError,
    onListenBack: ops.onListenBack,
  });
  const running = new Map<string, number>();
  const claiming = new Set<string>();
  /** When this loop last started a run of each tenant (a counter, not a clock). */
  const served = new Map<string, number>();
  let serial = 0;

  const limitOf = (workflow: string) => options.limits.get(workflow) ?? Number.POSITIVE_INFINITY;
  const idOf = (r: DueRun) => JSON.stringify([r.tenantId, r.key]);

  /**
   * The runs to start now: by turn (each tenant's oldest first), and within
   * a turn the tenants this loop served longest ago first, so a tenant's
   * backlog cannot keep another tenant's single run waiting.
   */
  function pick(candidates: DueRun[], free: number): DueRun[] {
    const order = candidates
      .filter((r) => !claiming.has(idOf(r)))
      .map((r, i) => ({ r, i, last: served.get(r.tenantId) ?? -1 }))
      .sort((a, b) => a.r.turn - b.r.turn || a.last - b.last || a.i - b.i);
    const chosen: DueRun[] = [];
    const counts = new Map<string, number>();
    for (const { r } of order) {
      if (chosen.length >= free) break;
      const n = (running.get(r.workflow) ?? 0) + (counts.get(r.workflow) ?? 0);
      if (n >= limitOf(r.workflow)) continue;
      counts.set(r.workflow, (counts.get(r.workflow) ?? 0) + 1);
      chosen.push(r);
    }
    return chosen;
  }

  function occupy(r: DueRun): void {
    const id = idOf(r);
    claiming.add(id);
    running.set(r.workflow, (running.get(r.workflow) ?? 0) + 1);
    if (served.size >= MEMORY) served.clear();
    served.set(r.tenantId, serial++);
    loop.occupy(() =>
      ops
        .execute(r)
        .catch(ops.onError)
        .finally(() => {
          claiming.delete(id);
          running.set(r.workflow, (running.get(r.workflow) ?? 1) - 1);
        }),
    );
  }

  loop.start(async (free) => {
    let started = 0;
    let pauseMs = options.pollMs;
    try {
      const open = options.workflows.filter((w) => (running.get(w) ?? 0) < limitOf(w));
      if (open.length > 0) {
        const scanned = performance.now();
        const candidates = await ops.select(open, Math.min(1_000, free * CANDIDATES_PER_SLOT));
        for (const r of pick(candidates, free)) {
          occupy(r);
          started++;
        }
        if (started === 0) {
          // What fell due since the scan began is not in it: look back that far (and 1 ms more).
          const next = await ops.nextWakeInMs(open, Math.ceil(performance.now() - scanned) + 1);
          if (next !== null) pauseMs = Math.min(pauseMs, Math.max(1, next));
        }
      }
    } catch (error) {
      ops.onError(error);
    }
    return { started, pauseMs };
  });
  return loop;
}
