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
