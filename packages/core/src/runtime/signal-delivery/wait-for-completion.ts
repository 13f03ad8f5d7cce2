/** `engine.wait`: poll a run's outcome (woken by its completion NOTIFY) until it completes or the time is up. */
import {
  IdempotencyKeyExpiredError,
  IdempotencyKeyInProgressError,
  RunNotFoundError,
  RunParkedError,
} from "../../errors.js";
import { assertValidRunKey } from "../../keys/key-validation.js";
import { WAIT_OPTIONS } from "../../options/known-options.js";
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions } from "../../options/option-shape.js";
import { selectOutcome } from "../../store/operations.js";
import { selectTombstone, tombstoneOf } from "../../store/tombstones.js";
import type { EngineContext } from "../engine-context.js";
import { isConnectionLoss } from "../execution/db-errors.js";
import type { RunResult } from "../execution/run-result.js";
import { storedResult } from "../execution/run-result.js";
import { FIRST_PAUSE_MS, MAX_PAUSE_MS } from "./completion-waiter.js";

/** Options of `engine.wait`. */
export interface WaitOptions {
  /** The longest to wait, in ms, 0 to 2 147 483 647; then `IdempotencyKeyInProgressError`. */
  timeoutMs: number;
}

/** Wait for a run to complete and return its stored response; see `Engine.wait`. */
export async function waitForCompletion(
  ctx: EngineContext,
  tenantId: string,
  key: string,
  opts: WaitOptions,
): Promise<RunResult<unknown>> {
  assertValidRunKey(tenantId, key);
  checkOptions("wait", WAIT_OPTIONS, opts);
  const timeoutMs = intOption("wait", "timeoutMs", opts.timeoutMs, 0, MAX_TIMER_MS, 0);
  const deadline = performance.now() + timeoutMs;
  const watch = ctx.waiter.watch(tenantId, key);
  let pause = FIRST_PAUSE_MS;
  try {
    for (;;) {
      let row: Awaited<ReturnType<typeof selectOutcome>>;
      let tombstone: ReturnType<typeof tombstoneOf>;
      try {
        row = await selectOutcome(ctx.db, ctx.tables, { tenantId, key });
        tombstone = row ? tombstoneOf(row) : await selectTombstone(ctx.db, ctx.tables, { tenantId, key });
      } catch (error) {
        // Reads only: a lost connection (a failover) is looked past until the time is up.
        const left = deadline - performance.now();
        if (left <= 0 || !isConnectionLoss(error)) throw error;
        await watch.pause(Math.min(left, pause));
        pause = Math.min(MAX_PAUSE_MS, pause * 2);
        continue;
      }
      if (tombstone) throw new IdempotencyKeyExpiredError(tenantId, key, tombstone);
      if (!row || row.expired) throw new RunNotFoundError(tenantId, key);
      if (row.status === "completed") {
        return storedResult(row.response_status, row.response_body, row.outcome);
      }
      if (row.status === "parked") throw new RunParkedError(tenantId, key, row.parked_reason ?? "parked");
      const retryAfterMs =
        row.status === "in_flight"
          ? Math.max(0, row.lease_remaining_ms ?? 0)
          : row.wake_remaining_ms === null
            ? ctx.leaseMs
            : Math.max(0, row.wake_remaining_ms);
      const left = deadline - performance.now();
      if (left <= 0) throw new IdempotencyKeyInProgressError(tenantId, key, retryAfterMs);
      await watch.pause(Math.min(left, pause));
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    }
  } finally {
    watch.close();
  }
}
