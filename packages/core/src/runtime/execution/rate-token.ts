/**
 * A step's `rateLimit`: before each call, a token of the engine's bucket of
 * that name (`store/rate-limits.ts`). A token due soon is reserved and
 * waited for in this process with no connection held; one due later than
 * the step may wait suspends the run until it is due.
 */
import { WorkflowDefinitionError } from "../../errors.js";
import type { Bucket } from "../../store/rate-limits.js";
import { suspendForToken, takeRateToken } from "../../store/rate-limits.js";
import type { ItemRun, Outcome } from "./item-run.js";
import { suspendedResult } from "./run-suspension.js";

function bucketOf({ deps, plan, item }: ItemRun<"step">, name: string): Bucket {
  const bucket = deps.rateLimits.get(name);
  if (!bucket) {
    throw new WorkflowDefinitionError(
      `workflow '${plan.def.name}', step '${item.name}': rateLimit '${name}' is not a rate limit of this engine`,
    );
  }
  return bucket;
}

/** Resolves after `ms` (plus one, so that the token is earned by the database clock too). */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms + 1));
}

/**
 * Before the step's first call: take a token of `name` and wait for it when
 * it is due within `maxWaitMs` (null: any time), or suspend the run until
 * it is due, before the step is recorded as started.
 *
 * @returns the outcome of a run that suspended (202), or undefined when the step may call now.
 */
export async function awaitToken(
  run: ItemRun<"step">,
  name: string,
  maxWaitMs: number | null,
): Promise<Outcome | undefined> {
  const { deps, plan, lease, info } = run;
  const answer = await lease.until(takeRateToken(deps.db, deps.tables, bucketOf(run, name), maxWaitMs));
  if (answer.taken) {
    if (answer.waitMs > 0) await lease.until(pause(answer.waitMs));
    return undefined;
  }
  const result = await suspendedResult(plan, info, deps.maxPayloadBytes);
  lease.finishing();
  if (!(await suspendForToken(deps.db, deps.tables, plan.own, answer.waitMs))) throw lease.lost();
  return { kind: "done", result };
}

/** Before a retry of the step: take a token of `name` and wait for it in this process, however long. */
export async function awaitRetryToken(run: ItemRun<"step">, name: string): Promise<void> {
  const { deps, lease } = run;
  const answer = await lease.until(takeRateToken(deps.db, deps.tables, bucketOf(run, name), null));
  if (answer.waitMs > 0) await lease.until(pause(answer.waitMs));
}
