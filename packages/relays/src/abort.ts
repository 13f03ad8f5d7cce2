/** Waiting on a promise that the delivery's signal may interrupt. */
import { DeliveryNotConfirmedError } from "./errors.js";

/**
 * Resolve with `promise`, or reject with a `DeliveryNotConfirmedError`
 * (`aborted`) as soon as `signal` aborts: the relay's claim ran out or the
 * relay is stopping, and a handler that kept waiting would hold its slot.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, what: string): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(aborted(what, signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted(what, signal));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function aborted(what: string, signal: AbortSignal): DeliveryNotConfirmedError {
  return new DeliveryNotConfirmedError("aborted", `gave up waiting for ${what}: the delivery was aborted`, {
    cause: signal.reason,
  });
}
