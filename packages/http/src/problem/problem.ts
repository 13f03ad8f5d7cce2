/**
 * The one table that turns an error into an HTTP answer. Every adapter and
 * both modes go through {@link problemReply}; the status always comes from
 * the error's `httpStatus`, never from a per-framework mapping.
 */
import { STATUS_CODES } from "node:http";
import { IdempoError, IdempotencyKeyInProgressError } from "@idempo/core";
import type { HttpReply } from "../response/reply.js";
import { jsonReply } from "../response/reply.js";

/** Media type of every error body (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** Problem `type` URIs are this prefix and the error's `code`, e.g. `urn:idempo:problem:key_mismatch`. */
export const PROBLEM_TYPE_PREFIX = "urn:idempo:problem:";

/** Short, stable titles per code; other codes use the status text. */
const TITLES: Readonly<Record<string, string>> = {
  key_in_progress: "A request with this idempotency key is still in progress",
  key_mismatch: "This idempotency key was used for a different request",
  key_expired: "This idempotency key named a request whose stored response has expired",
  invalid_key: "Invalid idempotency key",
  key_missing: "Idempotency key required",
  invalid_input: "Invalid request",
  invalid_body: "Invalid request body",
  request_too_large: "Request body too large",
  payload_too_large: "Payload too large to store",
  response_too_large: "Response too large to store",
  not_acceptable: "The stored response is in a coding this request does not accept",
  lease_lost: "The request was taken over by a retry",
  database_unavailable: "Database unavailable",
  run_not_found: "No run with this key",
  run_state: "The run's state does not allow this",
  webhook_unverified: "Webhook not verified",
  webhook_forbidden: "Webhook not allowed",
};

/** The JSON problem document for a code; `detail` is left out when undefined. */
export function problemDocument(
  code: string,
  status: number,
  detail: string | undefined,
  extra: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  return {
    type: `${PROBLEM_TYPE_PREFIX}${code}`,
    title: TITLES[code] ?? STATUS_CODES[status] ?? "Error",
    status,
    code,
    ...(detail === undefined ? {} : { detail }),
    ...extra,
  };
}

/**
 * The HTTP answer for an idempo error: `application/problem+json` with a
 * stable `type` and `code`, the status from `error.httpStatus`, and
 * `Retry-After` (whole seconds, rounded up, at least 1) for
 * `key_in_progress`. Client errors (4xx) carry the error's message as
 * `detail`; server errors (5xx) do not, because their messages name
 * internals (workflow, phase and step names) the caller has no use for.
 */
export function problemReply(error: IdempoError): HttpReply {
  const status = error.httpStatus;
  const extra: Record<string, unknown> = {};
  const headers: Record<string, string> = {};
  if (error instanceof IdempotencyKeyInProgressError) {
    headers["retry-after"] = retryAfterSeconds(error.retryAfterMs);
    extra.retryAfterMs = error.retryAfterMs;
  }
  const issues = (error as { issues?: unknown }).issues;
  if (status < 500 && Array.isArray(issues)) extra.issues = issues;
  const detail = status < 500 ? error.message : undefined;
  const doc = problemDocument(error.code, status, detail, extra);
  return jsonReply(status, JSON.stringify(doc), PROBLEM_CONTENT_TYPE, headers);
}

/** A `Retry-After` value for a wait of `ms`: whole seconds, rounded up, at least 1 (RFC 9110 §10.2.3). */
export function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

/** True for errors the problem table answers; anything else goes to the framework's error handling. */
export function isIdempoError(error: unknown): error is IdempoError {
  return error instanceof IdempoError;
}
