/**
 * `engine.startWorker`: the due-run loop (enqueued runs, woken sleeps,
 * signalled or timed-out waits) and a maintenance loop (resumeStale, sweep)
 * over the given workflows, stopped together.
 */
import { ListenConnectionLostError } from "../../database-errors.js";
import { InvalidOptionError } from "../../errors.js";
import { WORKER_OPTIONS } from "../../options/known-options.js";
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions } from "../../options/option-shape.js";
import { msUntilNextWake, selectDueRuns } from "../../store/due-runs.js";
import type { Definition } from "../../workflow/definition.js";
import { deployedByName, prioritiesOf } from "../../workflow/versions.js";
import type { EngineContext } from "../engine-context.js";
import { LoopErrors } from "../entry-errors.js";
import { startDueLoop } from "./due-loop.js";
import { executeDue } from "./execute-due.js";
import { startLoop } from "./interval-loop.js";
import type { ListenCheckOptions } from "./listen-options.js";
import { listenChecks } from "./listen-options.js";
import type { NotificationSource } from "./notifications.js";
import type { ResumeStaleOptions } from "./resume-stale.js";
import { resumeStale } from "./resume-stale.js";
import { sweep } from "./sweep.js";
import { registerWorkflows } from "./workflow-registration.js";

/** A running background worker. */
export interface Worker {
  /**
   * Stop scheduling rounds; wait for the due runs it executes (each at most
   * its attempt bound, `attemptTimeoutMs`) and stop listening. A poll or
   * maintenance round in progress is waited for at most `answerTimeoutMs`,
   * so `stop()` returns whatever the connections do: an abandoned poll
   * starts nothing when it returns, and runs an abandoned maintenance round
   * resumed go on in the background (if the process exits first, their
   * lease runs out and another worker resumes them from their recovery point).
   */
  stop(): Promise<void>;
}

/** Options of `startWorker`. */
export interface WorkerOptions extends ResumeStaleOptions, ListenCheckOptions {
  /**
   * Pause between maintenance rounds (resumeStale, sweep) in ms, and the
   * longest a worker goes without looking for due runs when nothing wakes
   * it (Default: 5 000).
   */
  intervalMs?: number;
  /** Due runs this worker executes at once, 1-1 000 (Default: 10). */
  concurrency?: number;
  /**
   * Most runs of one workflow this worker executes at once, by workflow
   * name (Default: no limit beyond `concurrency`). A limit per worker: with
   * N workers a workflow may run N times its limit. For a limit every
   * process shares, use the workflow's `.concurrency({ key, max })`.
   */
  workflowConcurrency?: Readonly<Record<string, number>>;
  /**
   * A connection to LISTEN on, so the worker wakes the moment a run is
   * enqueued or signalled (Default: poll only; polling is the guarantee).
   * Best a `pg.Pool` of its own (`max: 1`): the worker checks out one
   * client, checks it every `listenCheckMs`, and when it fails, ends or
   * stops answering within `answerTimeoutMs`, tells `onError` once (a
   * `ListenConnectionLostError`), releases it destroyed and checks out a
   * new one on a later check (the recovery is logged). A dedicated,
   * connected `pg.Client` is checked the same way but cannot reconnect
   * (polling only once it is lost). Or a PGlite instance. One per worker.
   */
  listen?: NotificationSource;
  /** Also sweep expired records each round (Default: true). */
  sweep?: boolean;
  /**
   * Also fire due schedule ticks (Default: true): those of the schedules
   * this engine registered with `engine.schedule`, and those without an
   * input function whose workflow is in `workflows`. Any number of workers
   * may fire: each tick starts one run.
   */
  schedules?: boolean;
  /**
   * Called with errors of a round; the loop goes on (Default: ignore). A
   * schema that was never migrated is reported once per outage, as the
   * `WorkflowUsageError` that names `engine.migrate()`, until a round works again.
   */
  onError?: (error: unknown) => void;
}

/** Pause between maintenance rounds when `intervalMs` is not given, in ms. */
export const DEFAULT_WORKER_INTERVAL_MS = 5_000;

/**
 * A loop run beside the worker's own (the schedule firing loop), started
 * once the options are checked: it reports through the worker's errors (so
 * a schema that was never migrated is still reported once per outage),
 * may wake the due-run loop for runs it created, and is stopped with it.
 */
export type BesideLoop = (errors: LoopErrors, wakeDue: () => void) => { stop(): Promise<void> };

/** Start a worker; see `Engine.startWorker`. */
export function startWorker(ctx: EngineContext, opts: WorkerOptions, beside?: BesideLoop): Worker {
  const at = "startWorker";
  checkOptions(at, WORKER_OPTIONS, opts);
  const intervalMs = intOption(at, "intervalMs", opts?.intervalMs, 1, MAX_TIMER_MS, DEFAULT_WORKER_INTERVAL_MS);
  const byName = deployedByName(at, opts.workflows);
  for (const versions of byName.values()) ctx.workflows.remember(versions);
  const limit = intOption(at, "limit", opts.limit, 1, 10_000, 100);
  const staleOptions: ResumeStaleOptions = { workflows: opts.workflows, limit };
  const concurrency = intOption(at, "concurrency", opts.concurrency, 1, 1_000, 10);
  const limits = new Map<string, number>();
  for (const [name, max] of Object.entries(opts.workflowConcurrency ?? {})) {
    if (!byName.has(name)) {
      throw new InvalidOptionError(
        "workflowConcurrency",
        `${at}: workflowConcurrency names '${name}', which is not in workflows`,
      );
    }
    limits.set(name, intOption(at, `workflowConcurrency.${name}`, max, 1, 1_000, 1));
  }
  const errors = new LoopErrors(ctx.tables.schema, at, opts.onError ?? (() => {}));
  const onError = (error: unknown) => errors.report(error);
  const checks = listenChecks(at, opts);
  // Once per worker, before its first maintenance round: what the SQL interface's enqueue reads.
  let registered = false;
  const maintenance = startLoop(
    intervalMs,
    async () => {
      if (!registered) {
        await registerWorkflows(ctx, byName.values());
        registered = true;
      }
      const report = await resumeStale(ctx, staleOptions);
      errors.ok();
      for (const f of report.failed) onError(f.error);
      if (opts.sweep !== false) await sweep(ctx);
    },
    onError,
  );
  const due = startDueLoop(
    { workflows: [...byName.keys()], concurrency, limits, pollMs: intervalMs, listen: opts.listen, ...checks },
    {
      select: async (workflows, max) => {
        const runs = await selectDueRuns(ctx.db, ctx.tables, workflows, max, prioritiesOf(byName, workflows));
        errors.ok();
        return runs;
      },
      nextWakeInMs: (workflows, lookbackMs) => msUntilNextWake(ctx.db, ctx.tables, workflows, lookbackMs),
      execute: async (r) => {
        await executeDue(ctx, byName.get(r.workflow) as readonly Definition[], r.tenantId, r.key);
      },
      onError: (error) => {
        if (error instanceof ListenConnectionLostError) {
          ctx.telemetry.log("warn", { error: error.message }, "idempo: worker lost its LISTEN connection");
        }
        onError(error);
      },
      onListenBack: () => ctx.telemetry.log("info", {}, "idempo: worker LISTEN re-established; NOTIFY wakes it again"),
    },
  );
  const besides = beside?.(errors, () => due.wake());
  return {
    async stop() {
      await Promise.all([maintenance.stop(checks.answerTimeoutMs), due.stop(), besides?.stop()]);
    },
  };
}
