/**
 * Which step an error came from. A step's own error reaches the caller as
 * the very object the step threw, so `instanceof` checks on the caller's
 * own error classes keep working; the engine only attaches a non-enumerable
 * property naming the step, which logs and error reporters can read through
 * {@link stepFailureOf} and which `JSON.stringify` and spreads never see.
 */

/** Where and how a step failed, as attached to the error it threw. */
export interface StepFailure {
  /** The workflow's name. */
  readonly workflow: string;
  /** The step's name; for a branch of a `.parallel` item, the item's name. */
  readonly step: string;
  /** The branch's name, when the step is a branch of a `.parallel` item (`step` names the item). */
  readonly branch?: string;
  readonly tenantId: string;
  /** The run's idempotency key. */
  readonly key: string;
  /** The run's attempt (1 for the first call, +1 per takeover). */
  readonly attempt: number;
  /** Calls made in this attempt, the first included (1 + in-process retries). */
  readonly tries: number;
  /**
   * The step's `retryable` accepted this last error: the failure is
   * transient (a timeout, a 503, a provider's "idempotency key in use"
   * conflict) and only the in-process retries ran out. Such a failure is
   * never stored as the run's answer, even under `onUnknownError: 'store'`:
   * the run stays in flight at its recovery point for the next attempt.
   */
  readonly retryable: boolean;
}

const FIELD = "idempoStep";

/**
 * Attach `failure` to `error` as the non-enumerable property `idempoStep`.
 * Errors that cannot carry a property (primitives, frozen objects) are left
 * as they are.
 */
export function markStepFailure(error: unknown, failure: StepFailure): void {
  if ((typeof error !== "object" && typeof error !== "function") || error === null) return;
  try {
    Object.defineProperty(error, FIELD, { value: Object.freeze(failure), enumerable: false, configurable: true });
  } catch {
    // A frozen or otherwise locked error object: it reaches the caller unnamed.
  }
}

/**
 * The step an error thrown by `runOnce` (or reported by `resumeStale` and a
 * worker's `onError`) came from, or `undefined` when a step did not throw
 * it (a phase, `respond`, idempo's own errors, or a value that cannot carry
 * a property, such as a thrown string).
 *
 * ```ts
 * try {
 *   await engine.runOnce(checkout, request)
 * } catch (error) {
 *   const failed = stepFailureOf(error) // { workflow: 'checkout', step: 'charge', tries: 3, ... }
 *   if (error instanceof Stripe.errors.StripeError) ... // still the SDK's own error
 * }
 * ```
 */
export function stepFailureOf(error: unknown): StepFailure | undefined {
  if ((typeof error !== "object" && typeof error !== "function") || error === null) return undefined;
  const value = (error as Record<string, unknown>)[FIELD];
  return typeof value === "object" && value !== null ? (value as StepFailure) : undefined;
}
