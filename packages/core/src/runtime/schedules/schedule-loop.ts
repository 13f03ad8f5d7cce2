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
import type { Worker, WorkerOptions } from "../background/worker.js";
import { DEFAULT_WORKER_INTERVAL_MS } from "../background/worker.js";
import type { EngineContext } from "../engine-context.js";
import { LoopErrors } from "../entry-errors.js";
import type { FiringScope } from "./fire-ticks.js";
import { fireDueSchedules } from "./fire-ticks.js";
import type { ScheduleRegistry } from "./schedule-service.js";

/** The newest given version of each workflow: what a schedule without input function starts. */
function newestByName(workflows: readonly Workflow<unknown, unknown>[]): Map<string, Workflow<unknown, unknown>> {
  const byName = new Map<string, Workflow<unknown, unknown>>();
  for (const w of workflows) {
    const known = byName.get(w.name);
    if (!known || known.version < w.version) byName.set(w.name, w);
  }
  return byName;
}

/**
 * `worker` (already started and its options checked) with the firing loop
 * beside it, unless `schedules: false`; `stop()` stops both.
 */
export function withScheduleFiring(
  ctx: EngineContext,
  registry: ScheduleRegistry,
  opts: WorkerOptions,
  worker: Worker,
): Worker {
  if (opts.schedules === false) return worker;
  const scope: FiringScope = { registry, workflows: newestByName(opts.workflows as Workflow<unknown, unknown>[]) };
  const intervalMs = opts.intervalMs ?? DEFAULT_WORKER_INTERVAL_MS;
  const { answerTimeoutMs } = listenChecks("startWorker", opts);
  const errors = new LoopErrors(ctx.tables.schema, "startWorker", opts.onError ?? (() => {}));
  const onError = (error: unknown) => errors.report(error);
  const stopping = new AbortController();
  const alarm = new WakeUp(stopping.signal);

  async function round(): Promise<number> {
    await fireDueSchedules(ctx, scope, onError);
    errors.ok();
    const names = [...registry.keys()];
    const ms = await msUntilNextTick(ctx.db, ctx.tables, names, [...scope.workflows.keys()]);
    return ms === null ? intervalMs : Math.min(intervalMs, Math.max(1, Math.ceil(ms)));
  }

  const loop = (async () => {
    while (!stopping.signal.aborted) {
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
      alarm.wake();
      // A round stuck on a connection that never answers must not hold stop() up; it starts no round after it.
      await Promise.all([worker.stop(), within(answerTimeoutMs, loop).catch(() => undefined)]);
    },
  };
}
