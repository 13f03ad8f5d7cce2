/**
 * Calling a step: its timeout, and in-process retries with exponential
 * backoff and full jitter (the AWS Architecture Blog's "Exponential Backoff
 * and Jitter") for the errors the step marks retryable.
 */
import type { RunControl, RunInfo, StepContext } from "../../workflow/context.js";
import type { Item } from "../../workflow/definition.js";
import { FailThrow, RejectThrow } from "./control-flow.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { StepFailure } from "./step-failure.js";
import { markStepFailure } from "./step-failure.js";
import type { StepTries } from "./step-tries.js";

type StepItem = Extract<Item, { kind: "step" }>;

function abortable(ms: number, abort: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (abort.aborted) return reject(abort.reason);
    const timer = setTimeout(() => {
      abort.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abort.reason);
    };
    abort.addEventListener("abort", onAbort, { once: true });
  });
}

/** What a step call needs of its attempt's lease: the AbortSignal that stops it, made only when asked for. */
export interface LeaseSignal {
  readonly abortSignal: AbortSignal;
  readonly aborted: boolean;
}

/**
 * Ask the step's `reconcile` (a branch's too) when the call is in doubt:
 * `priorStarts` earlier attempts started it without recording a result, so
 * one of them may have reached the other system. What it answers stands
 * for the call's result; `undefined`, also when nothing was asked, means
 * the call is to be made. `signal` aborts it, `lease` bounds it.
 */
export async function reconcileInDoubt(
  item: Pick<StepItem, "options">,
  priorStarts: number,
  info: RunInfo<unknown, unknown>,
  idempotencyKey: string,
  lease: Pick<LeaseKeeper, "until">,
  signal: LeaseSignal,
): Promise<unknown> {
  const reconcile = item.options.reconcile;
  if (!(priorStarts > 0 && reconcile)) return undefined;
  return lease.until(Promise.resolve(reconcile({ ...info, idempotencyKey, signal: signal.abortSignal })));
}

/**
 * Call the step, retrying as its options allow; `onRetry` hears of each retry (and may hold it), `tries` of each call's
 * end. `lease` aborts everything. The error that ends the calls is rethrown as it is, marked with the
 * step it came from (`where`).
 */
export async function callStep(
  item: StepItem,
  info: RunInfo<unknown, unknown>,
  control: RunControl,
  idempotencyKey: string,
  lease: LeaseSignal,
  onRetry: () => void | Promise<void>,
  where: Omit<StepFailure, "tries" | "retryable">,
  tries: StepTries,
): Promise<unknown> {
  const { retries = 0, retryable, backoffMs = 100, maxBackoffMs = 5_000, timeoutMs } = item.options;
  for (let tryNo = 0; ; tryNo++) {
    let began = 0;
    try {
      // A step with a timeout gets its own abort signal, which starts counting now.
      const timed =
        timeoutMs === undefined ? undefined : AbortSignal.any([lease.abortSignal, AbortSignal.timeout(timeoutMs)]);
      // Spelt out, not spread from `info`: a literal is made many times faster.
      const ctx: StepContext<unknown, unknown> = {
        input: info.input,
        state: info.state,
        key: info.key,
        tenantId: info.tenantId,
        attempt: info.attempt,
        fail: control.fail,
        reject: control.reject,
        idempotencyKey,
        // Without a timeout, the lease's own abort signal, made only when the step reads it.
        get signal() {
          return timed ?? lease.abortSignal;
        },
      };
      began = performance.now();
      const result = await item.run(ctx);
      tries.ended(began, undefined);
      return result;
    } catch (error) {
      tries.ended(began, { error });
      if (error instanceof FailThrow || error instanceof RejectThrow || lease.aborted) throw error;
      // Asked about the last error too: a transient failure that ran out of tries is not a final answer.
      const again = retryable?.(error) === true;
      if (!again || tryNo >= retries) {
        markStepFailure(error, { ...where, tries: tryNo + 1, retryable: again });
        throw error;
      }
      await onRetry();
      await abortable(Math.random() * Math.min(maxBackoffMs, backoffMs * 2 ** tryNo), lease.abortSignal);
    }
  }
}
