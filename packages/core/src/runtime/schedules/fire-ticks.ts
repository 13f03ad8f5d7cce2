/**
 * One firing round: for each due schedule this worker may fire, lock its
 * row (SKIP LOCKED), start the run of each tick to fire with `enqueue` in
 * the same transaction, and move the row past them. The runs and the move
 * commit together: a worker killed in between leaves the row as it was, and
 * the next worker fires the same ticks under the same keys.
 */
import { IdempoError, IdempotencyKeyExpiredError, WorkflowUsageError } from "../../errors.js";
import type { Executor } from "../../store/run-store.js";
import type { FiringFilter, ScheduleRow } from "../../store/schedules.js";
import { lockDueSchedule, recordFiring, selectDueSchedules } from "../../store/schedules.js";
import type { Workflow } from "../../workflow/definition.js";
import { enqueueOn } from "../admission/enqueue.js";
import { NoAnswer, within } from "../background/bounded-wait.js";
import type { EngineContext } from "../engine-context.js";
import { leaseFor } from "../engine-context.js";
import { engineTransaction } from "../engine-db.js";
import type { ScheduleTick } from "./schedule-options.js";
import { tickKey } from "./schedule-options.js";
import type { ScheduleRegistry } from "./schedule-registry.js";
import { defaultInput } from "./schedule-service.js";
import { cronOf, planTicks } from "./ticks.js";

/** Due schedules looked at per round. */
const SCHEDULES_PER_ROUND = 50;

/** What a worker fires: the schedules registered in its engine, and those of its workflows without input function. */
export interface FiringScope {
  readonly registry: ScheduleRegistry;
  readonly workflows: ReadonlyMap<string, Workflow<unknown, unknown>>;
}

/** What `scope` may fire, for the statements that find due schedules (the same rule as {@link resolve}). */
export function filterOf(scope: FiringScope): FiringFilter {
  return {
    registered: [...scope.registry.entries()].map(([name, r]) => ({
      name,
      workflow: r.workflow.name,
      hasInput: r.input !== undefined,
    })),
    workflows: [...scope.workflows.keys()],
  };
}

/** The workflow and input function to fire `row` with in this process, or null when it cannot. */
function resolve(scope: FiringScope, row: ScheduleRow) {
  const registered = scope.registry.get(row.name);
  const mine = registered?.workflow.name === row.workflow ? registered : undefined;
  const workflow = mine?.workflow ?? scope.workflows.get(row.workflow);
  if (workflow === undefined) return null;
  if (!row.has_input) return { workflow, input: defaultInput };
  return mine?.input ? { workflow, input: mine.input } : null;
}

/**
 * Fire the due ticks of the schedules in `scope`; returns how many ticks
 * were fired (or skipped on an error) in all. Errors of single ticks go to
 * `onError`; the round goes on.
 */
export async function fireDueSchedules(
  ctx: EngineContext,
  scope: FiringScope,
  onError: (error: unknown) => void,
): Promise<number> {
  const names = await selectDueSchedules(ctx.db, ctx.tables, filterOf(scope), SCHEDULES_PER_ROUND);
  let fired = 0;
  for (const name of names) {
    try {
      fired += await fireSchedule(ctx, scope, name, onError);
    } catch (error) {
      onError(error);
    }
  }
  return fired;
}

/** Fire one schedule in its own transaction; 0 when another worker holds it or it is no longer due. */
async function fireSchedule(
  ctx: EngineContext,
  scope: FiringScope,
  name: string,
  onError: (error: unknown) => void,
): Promise<number> {
  return engineTransaction(ctx.layer, async (tx) => {
    const row = await lockDueSchedule(tx, ctx.tables, name);
    const how = row ? resolve(scope, row) : null;
    if (!row || !how || row.next_tick_at === null) return 0;
    const rule = cronOf(`schedule '${name}'`, row.cron, row.timezone);
    const plan = planTicks(rule, {
      next: row.next_tick_at,
      now: row.now,
      graceMs: row.grace_ms,
      catchUp: row.catch_up,
    });
    let lastTickAt: Date | null = null;
    let error: string | null = null;
    // Refused input, a mismatch, an error of the input function: retrying cannot cure it; the tick is skipped.
    // Any other error (the database's) fails the whole transaction: nothing of this round stays.
    const skip = (at: Date, e: unknown) => {
      error = lastErrorText(at, e);
      onError(e);
      ctx.telemetry.log("warn", { schedule: name, error }, "idempo: a schedule's tick started no run");
    };
    const inputMs = leaseFor(ctx, how.workflow.definition);
    for (const at of plan.fire) {
      // A copy of `at`: an input function that changes it must not change what this round records.
      const tick: ScheduleTick = Object.freeze({ schedule: name, at: new Date(at), key: tickKey(name, at) });
      let input: unknown;
      try {
        input = await within(
          inputMs,
          Promise.resolve().then(() => how.input(tick)),
        );
      } catch (e) {
        // No answer: the function may just be slow, so the tick is not skipped. The round rolls back and gives
        // the row (and its lock) up; a later round fires the same tick again.
        if (e instanceof NoAnswer) throw noAnswer(name, at, inputMs);
        skip(at, e);
        continue;
      }
      try {
        await startRun(ctx, tx, row, how.workflow, tick, input);
        lastTickAt = at;
      } catch (e) {
        if (!(e instanceof IdempoError)) throw e;
        skip(at, e);
      }
    }
    await recordFiring(tx, ctx.tables, name, { nextTickAt: plan.next, lastTickAt, error });
    return plan.fire.length;
  });
}

/** `lastError` keeps a one-line cause: the start of a long message is enough to find the rest in `onError`. */
const LAST_ERROR_CHARS = 1_000;

/** The `lastError` of a skipped tick, at most {@link LAST_ERROR_CHARS} characters, never a half surrogate pair. */
function lastErrorText(at: Date, e: unknown): string {
  const text = `tick ${at.toISOString()}: ${e instanceof Error ? e.message : String(e)}`;
  if (text.length <= LAST_ERROR_CHARS) return text;
  const cut = text.slice(0, LAST_ERROR_CHARS - 1);
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
}

/** What a round that waited too long for an input function raises (to `onError`), after rolling back. */
function noAnswer(name: string, at: Date, ms: number): WorkflowUsageError {
  return new WorkflowUsageError(
    `schedule '${name}': the input function did not answer within ${ms} ms (the workflow's lease) for tick ` +
      `${at.toISOString()}; nothing of this round was kept, and a later round fires the tick again`,
  );
}

/** Start the tick's run; a tick whose run is so old that only its tombstone is left was fired long ago. */
async function startRun(
  ctx: EngineContext,
  tx: Executor,
  row: ScheduleRow,
  workflow: Workflow<unknown, unknown>,
  tick: ScheduleTick,
  input: unknown,
): Promise<void> {
  try {
    await enqueueOn(ctx, tx, workflow, { tenantId: row.tenant_id, key: tick.key, input });
  } catch (error) {
    if (!(error instanceof IdempotencyKeyExpiredError)) throw error;
  }
}
