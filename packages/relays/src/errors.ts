/**
 * The errors the relay handlers raise. Each is an `IdempoError` with a
 * stable `code`. A delivery handler that throws one makes the relay retry
 * the message later (with backoff) and dead-letter it after `maxAttempts`.
 */
import { IdempoError } from "@idempo/core";

/**
 * A relay handler was built with options it cannot work with (an empty URL,
 * a non-positive timeout, an empty secret, a route that returned no
 * exchange). Raised when the handler is created, or when a routing function
 * returns something unusable; nothing is published then.
 */
export class RelayOptionsError extends IdempoError {
  constructor(message: string) {
    super("invalid_relay_options", 500, message);
    this.name = "RelayOptionsError";
  }
}

/** Why a broker did not confirm a publish. */
export type UnconfirmedReason = "nacked" | "unroutable" | "connection_lost" | "aborted" | "closed" | "rejected";

/**
 * The broker did not confirm a publish, so the message is not marked
 * delivered: the broker refused it (`nacked`, `rejected`), could route it
 * to no queue (`unroutable`), the connection or channel closed before the
 * confirm arrived (`connection_lost`), the delivery's signal aborted while
 * waiting (`aborted`), or the publisher was closed (`closed`). The message
 * may still have reached the broker in the last three cases; the retry
 * carries the same delivery key, so consumers can drop the copy.
 */
export class DeliveryNotConfirmedError extends IdempoError {
  /** What went wrong, as one of a fixed set of words. */
  readonly reason: UnconfirmedReason;

  constructor(reason: UnconfirmedReason, message: string, options?: { cause?: unknown }) {
    super("delivery_not_confirmed", 502, message, options);
    this.name = "DeliveryNotConfirmedError";
    this.reason = reason;
  }
}
