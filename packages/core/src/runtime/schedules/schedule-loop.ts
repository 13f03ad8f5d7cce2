/**
 * The firing loop a worker runs beside its due-run loop: a round fires the
 * due ticks (`fire-ticks.ts`), then the loop sleeps until the earliest next
 * tick among the schedules it may fire, or `intervalMs` at most (so a
 * schedule created or changed elsewhere is seen within it). Off the hot
 * path of `runOnce`: nothing here runs on a request.
 */
import { msUntilNextTick } from "../../store/schedules.js";
import type { Workflow } from "../../workflow/definition.js";
import { within } from "../background/bounded-wait.js";
import { listenChecks } from "../background/listen-options.js";
import { WakeUp } from "../background/wake-up.js";
import type { BesideLoop, WorkerOptions } from "../background/worker.js";
import { DEFAULT_WORKER_INTERVAL_MS } from "../background/worker.js";
import type { EngineContext } from "../engine-context.js";
import type { FiringScope } from "./fire-ticks.js";
import { filterOf, fireDueSchedules } from "./fire-ticks.js";
import type { ScheduleRegistry } from "./schedule-registry.js";

/** The pause when a due schedule was held by another worker: it is firing it now. */
const HELD_PAUSE_MS = 100;

/** The newest given version of each workflow: what a schedule without input function starts. */
export function newestByName(
  workflows: readonly Workflow<unknown, unknown>[],
): Map<string, Workflow<unknown, unknown>> {
  const byName = new Map<string, Workflow<unknown, unknown>>();
  for (const w of workflows) {
    const known = byName.get(w.name);
    if (!known || known.version < w.version) byName.set(w.name, w);
  }
  return byName;
}

/**
 * The firing loop for a worker with options `opts` (checked by the worker
 * before it starts the loop), or undefined with `schedules: false`.
 */
export function scheduleFiring(
  ctx: EngineContext,
  registry: ScheduleRegistry,
  opts: WorkerOptions,
): BesideLoop | undefined {
  if (opts?.schedules === false) return undefined;
  return (errors, wakeDue) => {
    const scope: FiringScope = { registry, workflows: newestByName(opts.workflows as Workflow<unknown, unknown>[]) };
    const intervalMs = opts.intervalMs ?? DEFAULT_WORKER_INTERVAL_MS;
    const { answerTimeoutMs } = listenChecks("startWorker", opts);
    let failed = false;
    const onError = (error: unknown) => {
      failed = true;
      errors.report(error);
    };
    const stopping = new AbortController();
    const alarm = new WakeUp(stopping.signal);
    const unsubscribe = registry.onChange(() => alarm.wake());

    /** Fire what is due; the pause until the next round. */
    async function round(): Promise<number> {
      failed = false;
      const fired = await fireDueSchedules(ctx, scope, onError);
      errors.ok();
      // The runs just created are due now: this worker's due-run loop need not wait for its poll or a NOTIFY.
      if (fired > 0) wakeDue();
      const ms = await msUntilNextTick(ctx.db, ctx.tables, filterOf(scope));
      if (ms === null) return intervalMs;
      // Still due: more ticks than a round fires (look again at once), another worker holds the row, or this
      // round failed on it (a zone this runtime does not know...): that one is looked at again after intervalMs.
      if (ms <= 0) return fired > 0 ? 1 : failed ? intervalMs : Math.min(intervalMs, HELD_PAUSE_MS);
      return Math.min(intervalMs, Math.ceil(ms));
    }

    const loop = (async () => {
      while (!stopping.signal.aborted) {
        alarm.clear(); // a registration before this look is seen by it
        let pauseMs = intervalMs;
        try {
          pauseMs = await round();
        } catch (error) {
          onError(error);
        }
        await alarm.pause(pauseMs);
      }
    })();

    return {
      async stop() {
        stopping.abort();
        unsubscribe();
        alarm.wake();
        // A round stuck on a connection that never answers must not hold stop() up; it starts no round after it.
        await within(answerTimeoutMs, loop).catch(() => undefined);
      },
    };
  };
}
