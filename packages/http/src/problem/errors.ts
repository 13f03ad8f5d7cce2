/**
 * Errors raised by the HTTP layer itself. They extend the engine's
 * `IdempoError`, so they carry a stable `code` and an `httpStatus` and go
 * through the same problem table as the engine's own errors.
 */
import { IdempoError } from "@idempo/core";

/** The route requires an `Idempotency-Key` header and the request has none (400 `key_missing`). */
export class IdempotencyKeyMissingError extends IdempoError {
  constructor() {
    super(
      "key_missing",
      400,
      "this endpoint requires an Idempotency-Key header: mint one key per intent (a UUID is fine) and send it with every retry",
    );
  }
}

/**
 * The request body is larger than the middleware buffers to fingerprint it
 * (413 `request_too_large`). Refused before the handler runs; no key is claimed.
 */
export class RequestBodyTooLargeError extends IdempoError {
  /** The limit in bytes. */
  readonly limitBytes: number;
  constructor(limitBytes: number) {
    super(
      "request_too_large",
      413,
      `the request body is larger than ${limitBytes} bytes, the most this endpoint reads for an idempotent request`,
    );
    this.limitBytes = limitBytes;
  }
}

/**
 * The request says it is JSON but its body does not parse (400
 * `invalid_body`). Refused before the handler runs; no key is claimed.
 */
export class InvalidRequestBodyError extends IdempoError {
  constructor(detail: string) {
    super("invalid_body", 400, `the request body is not valid JSON: ${detail}`);
  }
}

/**
 * A webhook request that did not pass the application's verification: 401
 * `webhook_unverified` when its signature is missing or wrong (what a
 * webhook route answers when `verify` returns false), 403
 * `webhook_forbidden` for a genuine request that may not do this (throw it
 * from `verify` with 403). Nothing is read from the body or signalled.
 */
export class WebhookVerificationError extends IdempoError {
  constructor(status: 401 | 403 = 401, detail?: string) {
    if (status !== 401 && status !== 403)
      throw new TypeError(`WebhookVerificationError takes 401 or 403, not ${status}`);
    super(
      status === 401 ? "webhook_unverified" : "webhook_forbidden",
      status,
      detail ??
        (status === 401
          ? "the webhook's signature is missing or does not match: the request was not verified as coming from the provider"
          : "the webhook was verified but is not allowed to signal this run"),
    );
  }
}

/**
 * A stored response cannot be replayed in a content coding the request
 * accepts (406 `not_acceptable`): its body was stored encoded (say `zstd`
 * on a Node without a zstd decoder) and the request's `Accept-Encoding`
 * refuses that coding. Retry accepting the stored coding. Nothing changed;
 * the record stays as it is.
 */
export class ReplayNotAcceptableError extends IdempoError {
  /** The stored body's content coding(s), e.g. `zstd`. */
  readonly storedCoding: string;
  constructor(storedCoding: string, options?: { cause?: unknown }) {
    super(
      "not_acceptable",
      406,
      `the stored response is encoded as '${storedCoding}', which this request's Accept-Encoding does not accept ` +
        "and which cannot be decoded here; retry accepting that coding",
      options,
    );
    this.storedCoding = storedCoding;
  }
}
