import { InvalidIdempotencyKeyError } from "../errors.js";
import { hasLoneSurrogate } from "../json/json-value.js";

/** Longest key or tenant id accepted, in UTF-8 bytes (the IETF draft and Stripe cap keys at 255). */
export const MAX_KEY_BYTES = 255;

// Unicode category Cc: C0 controls, DEL and C1 controls (U+0085 NEL among them, a line break to
// some terminals and log readers). Values are otherwise taken verbatim: never trimmed, never case-folded.
const CONTROL = /[\u0000-\u001F\u007F-\u009F]/;

/**
 * Check an idempotency key or tenant id before anything touches the
 * database. `what` names the field in the error ("idempotency key", "tenant id").
 *
 * @throws InvalidIdempotencyKeyError when the value is not a string, is
 *   empty or whitespace only, exceeds 255 UTF-8 bytes, or holds a control
 *   character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F).
 */
export function assertValidKey(value: unknown, what: string): asserts value is string {
  if (typeof value !== "string") {
    throw new InvalidIdempotencyKeyError(`${what} must be a string, got ${value === null ? "null" : typeof value}`);
  }
  if (value.length === 0) throw new InvalidIdempotencyKeyError(`${what} must not be empty`);
  // Cheap upper bound first so a 100 kB value is refused without encoding it.
  if (value.length > MAX_KEY_BYTES || Buffer.byteLength(value, "utf8") > MAX_KEY_BYTES) {
    throw new InvalidIdempotencyKeyError(`${what} is longer than ${MAX_KEY_BYTES} UTF-8 bytes`);
  }
  if (CONTROL.test(value)) throw new InvalidIdempotencyKeyError(`${what} must not contain control characters`);
  if (value.trim().length === 0) throw new InvalidIdempotencyKeyError(`${what} must not be only whitespace`);
  if (hasLoneSurrogate(value)) throw new InvalidIdempotencyKeyError(`${what} holds a lone UTF-16 surrogate`);
}

/**
 * Check the pair that names a run, tenant id first: what every engine call
 * taking `(tenantId, key)` checks before any SQL.
 *
 * @throws InvalidIdempotencyKeyError as {@link assertValidKey}, naming "tenant id" or "idempotency key".
 */
export function assertValidRunKey(tenantId: unknown, key: unknown): asserts tenantId is string {
  assertValidKey(tenantId, "tenant id");
  assertValidKey(key, "idempotency key");
}
