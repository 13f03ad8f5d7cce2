/**
 * The receiver's side of a signed webhook: check the signature header
 * against the raw body before trusting anything in it.
 */
import { timingSafeEqual } from "node:crypto";
import type { JsonValue } from "@idempo/core";
import { IdempoError, InvalidOptionError } from "@idempo/core";
import type { WebhookEvent } from "./event.js";
import { computeSignature, parseSignatureHeader, SIGNATURE_HEADER } from "./signature.js";

/** Why a webhook request was refused. */
export type WebhookRefusal =
  | "missing_header"
  | "malformed_header"
  | "no_matching_signature"
  | "timestamp_out_of_tolerance"
  | "malformed_body";

/**
 * A webhook request failed verification: answer it with a 400 and do not
 * act on its body. `reason` says which check failed.
 */
export class WebhookSignatureError extends IdempoError {
  /** Which check failed. */
  readonly reason: WebhookRefusal;

  constructor(reason: WebhookRefusal, message: string) {
    super("webhook_signature_invalid", 400, message);
    this.name = "WebhookSignatureError";
    this.reason = reason;
  }
}

/** Options of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /** The raw request body, exactly as received (not re-serialised JSON). */
  body: string | Uint8Array;
  /** The value of the `Idempo-Signature` header (`undefined` or `null` when absent). */
  signature: string | null | undefined;
  /** The endpoint's secret; several during a rotation (any one may match). */
  secret: string | readonly string[];
  /**
   * Largest accepted distance between the signed timestamp and now, in
   * seconds: an integer from 0 to 86 400 (one day) (Default: 300). Anything
   * else (`NaN` from an unset environment variable, `Infinity`, a negative
   * number, a string) is refused, because it would turn the replay window off.
   */
  toleranceSeconds?: number;
  /** The receiver's clock: a valid `Date` (Default: the current time). */
  now?: Date;
}

/** Default replay window, in seconds (as Stripe's libraries use). */
const DEFAULT_TOLERANCE_S = 300;
/** A window of more than a day is no replay protection worth the name. */
const MAX_TOLERANCE_S = 86_400;

function given(value: unknown): string {
  return typeof value === "string" ? `the string ${JSON.stringify(value)}` : String(value);
}

/** @throws InvalidOptionError unless `value` is undefined or an integer from 0 to {@link MAX_TOLERANCE_S}. */
function toleranceOf(value: unknown): number {
  if (value === undefined) return DEFAULT_TOLERANCE_S;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MAX_TOLERANCE_S) {
    throw new InvalidOptionError(
      "toleranceSeconds",
      `verifyWebhook: toleranceSeconds must be an integer from 0 to ${MAX_TOLERANCE_S.toLocaleString("en")} ` +
        `(seconds), got ${given(value)}; a value that is not would turn the replay window off`,
    );
  }
  return value;
}

/** @throws InvalidOptionError unless `value` is undefined or a valid Date. */
function nowOf(value: unknown): Date {
  if (value === undefined) return new Date();
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new InvalidOptionError("now", `verifyWebhook: now must be a valid Date, got ${given(value)}`);
  }
  return value;
}

/**
 * Verify a webhook sent by `createWebhookSender` and return its event.
 *
 * Recomputes the HMAC-SHA256 of `timestamp.body` under each secret and
 * compares it with each `v1` signature in constant time
 * (`crypto.timingSafeEqual`), so the comparison leaks nothing about how
 * much of a forged signature was right. Then refuses a timestamp more than
 * `toleranceSeconds` away from `now`, so a captured request cannot be
 * replayed later. The scheme follows Stripe's webhook signatures.
 *
 * Deduplicate on `event.id` (also sent as `Idempotency-Key`): the relay
 * delivers at least once.
 *
 * @throws WebhookSignatureError (`webhook_signature_invalid`, 400) naming the failed check.
 * @throws InvalidOptionError (`invalid_option`) for a `toleranceSeconds` or `now` out of range, before any check.
 * @example
 * const event = verifyWebhook({ body: rawBody, signature: req.headers["idempo-signature"], secret });
 */
export function verifyWebhook(options: VerifyWebhookOptions): WebhookEvent {
  const { body, signature } = options;
  const secrets = typeof options.secret === "string" ? [options.secret] : options.secret;
  const tolerance = toleranceOf(options.toleranceSeconds);
  const now = nowOf(options.now);
  if (secrets.length === 0 || secrets.some((s) => s.length === 0)) {
    throw new TypeError("verifyWebhook needs at least one non-empty secret");
  }
  if (signature === undefined || signature === null || signature === "") {
    throw new WebhookSignatureError("missing_header", `the request has no ${SIGNATURE_HEADER} header`);
  }
  const parsed = parseSignatureHeader(signature);
  if (!parsed) {
    throw new WebhookSignatureError(
      "malformed_header",
      `the ${SIGNATURE_HEADER} header is not of the form t=<unix seconds>,v1=<hex signature>`,
    );
  }
  const given = parsed.signatures.filter((s) => /^[0-9a-f]{64}$/.test(s)).map((s) => Buffer.from(s, "hex"));
  const matches = secrets.some((secret) => {
    const expected = Buffer.from(computeSignature(secret, parsed.timestamp, body), "hex");
    return given.some((g) => timingSafeEqual(g, expected));
  });
  if (!matches) {
    throw new WebhookSignatureError(
      "no_matching_signature",
      "no signature in the header matches the body under the configured secret(s); was the body re-serialised, or the secret rotated?",
    );
  }
  const nowSeconds = Math.floor(now.getTime() / 1000);
  if (Math.abs(nowSeconds - parsed.timestamp) > tolerance) {
    throw new WebhookSignatureError(
      "timestamp_out_of_tolerance",
      `the signed timestamp is ${nowSeconds - parsed.timestamp} s away from now; at most ${tolerance} s is accepted`,
    );
  }
  let event: JsonValue;
  try {
    event = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8")) as JsonValue;
  } catch {
    throw new WebhookSignatureError("malformed_body", "the signed body is not JSON");
  }
  return event as unknown as WebhookEvent;
}
