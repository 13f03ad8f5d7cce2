/**
 * Calling a step: its timeout, and in-process retries with exponential
 * backoff and full jitter (the AWS Architecture Blog's "Exponential Backoff
 * and Jitter") for the errors the step marks retryable.
 */
import type { StepContext } from "../workflow/context.js";
import type { Item } from "../workflow/definition.js";
import { FailSignal, RejectSignal } from "./signals.js";
import type { StepFailure } from "./step-failure.js";
import { markStepFailure } from "./step-failure.js";

type StepItem = Extract<Item, { kind: "step" }>;

function abortable(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Call the step, retrying as its options allow; `onRetry` hears of each retry. `leaseSignal` aborts everything.
 * The error that ends the calls is rethrown as it is, marked with the step it came from (`where`).
 */
export async function callStep(
  item: StepItem,
  ctx: Omit<StepContext<unknown, unknown>, "signal">,
  leaseSignal: AbortSignal,
  onRetry: () => void,
  where: Omit<StepFailure, "tries" | "retryable">,
): Promise<unknown> {
  const { retries = 0, retryable, backoffMs = 100, maxBackoffMs = 5_000, timeoutMs } = item.options;
  for (let tryNo = 0; ; tryNo++) {
    const signal =
      timeoutMs === undefined ? leaseSignal : AbortSignal.any([leaseSignal, AbortSignal.timeout(timeoutMs)]);
    try {
      return await item.run({ ...ctx, signal } as StepContext<unknown, unknown>);
    } catch (error) {
      if (error instanceof FailSignal || error instanceof RejectSignal || leaseSignal.aborted) throw error;
      // Asked about the last error too: a transient failure that ran out of tries is not a final answer.
      const again = retryable?.(error) === true;
      if (!again || tryNo >= retries) {
        markStepFailure(error, { ...where, tries: tryNo + 1, retryable: again });
        throw error;
      }
      onRetry();
      await abortable(Math.random() * Math.min(maxBackoffMs, backoffMs * 2 ** tryNo), leaseSignal);
    }
  }
}
