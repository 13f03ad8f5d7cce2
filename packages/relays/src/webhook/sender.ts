/**
 * The relay handler that delivers outbox messages as signed HTTP webhooks.
 */
import type { DeliveryHandler, OutboxMessage } from "@idempo/core";
import { IdempoError } from "@idempo/core";
import { RelayOptionsError } from "../errors.js";
import { toWebhookEvent } from "./event.js";
import { SIGNATURE_HEADER, signatureHeader } from "./signature.js";

/**
 * A webhook was not accepted: the receiver answered with a status outside
 * 2xx (`status` is set), or no answer came (network error, timeout). The
 * relay retries it with backoff and dead-letters it after `maxAttempts`.
 * `retryable` is false for a 4xx other than 408 and 429: the receiver
 * refused the request itself, and a retry helps only once someone fixed
 * the receiver or its configuration (alert on these in `onError`).
 */
export class WebhookDeliveryError extends IdempoError {
  /** The receiver's HTTP status, when it answered. */
  readonly status: number | undefined;
  /** False for a 4xx other than 408 and 429: the receiver refused the request itself. */
  readonly retryable: boolean;

  constructor(message: string, status: number | undefined, retryable: boolean, options?: { cause?: unknown }) {
    super("webhook_failed", 502, message, options);
    this.name = "WebhookDeliveryError";
    this.status = status;
    this.retryable = retryable;
  }
}

/** Options of {@link createWebhookSender}. */
export interface WebhookSenderOptions {
  /** Where to POST: a fixed URL, or one per message (per tenant, per topic). */
  url: string | URL | ((message: OutboxMessage) => string | URL);
  /**
   * The endpoint's signing secret, or one per message. Several secrets sign
   * with each, for a rotation: the receiver accepts any one it knows.
   */
  secret: string | readonly string[] | ((message: OutboxMessage) => string | readonly string[]);
  /** Time for the receiver to answer with its status, in ms (Default: 10 000). Shorter than the relay's `leaseMs`. */
  timeoutMs?: number;
  /** Extra request headers, sent with every webhook (Default: none). */
  headers?: Readonly<Record<string, string>>;
}

/** The header that carries the delivery key, as in the IETF Idempotency-Key draft. */
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

const ERROR_BODY_CHARS = 200;

/**
 * A delivery handler that POSTs each message as JSON (a {@link WebhookEvent}:
 * `{ id, topic, tenantId, createdAt, payload }`) with:
 *
 * - `Idempotency-Key`: the delivery key, the same on every redelivery;
 * - `Idempo-Signature`: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`,
 *   after Stripe's webhook signatures (check it with `verifyWebhook`).
 *
 * A 2xx answer marks the message delivered. Anything else throws a
 * `WebhookDeliveryError`, and the relay retries with its backoff until
 * `maxAttempts`, then dead-letters the message with the last error. A
 * receiver that does not answer within `timeoutMs`, or a relay whose claim
 * runs out, aborts the request; the receiver may still have acted on it, so
 * it must deduplicate on the key. Redirects are not followed (a redirected
 * POST would lose its body or its target): a 3xx is a failure.
 *
 * @throws RelayOptionsError when created with an unusable URL, secret or timeout.
 * @example
 * engine.startRelay({ handlers: { "order.paid": createWebhookSender({ url, secret }) } });
 */
export function createWebhookSender(options: WebhookSenderOptions): DeliveryHandler {
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RelayOptionsError(`webhook timeoutMs must be a positive number of ms, got ${String(timeoutMs)}`);
  }
  if (typeof options.url !== "function") toUrl(options.url);
  if (typeof options.secret !== "function") toSecrets(options.secret);
  const extra = Object.entries(options.headers ?? {});

  return async (message, { deliveryKey, signal }) => {
    const url = toUrl(typeof options.url === "function" ? options.url(message) : options.url);
    const secrets = toSecrets(typeof options.secret === "function" ? options.secret(message) : options.secret);
    const body = JSON.stringify(toWebhookEvent(message, deliveryKey));
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = new Headers(extra);
    headers.set("content-type", "application/json");
    headers.set(IDEMPOTENCY_KEY_HEADER, deliveryKey);
    headers.set(SIGNATURE_HEADER, signatureHeader(secrets, timestamp, body));
    const timeout = AbortSignal.timeout(timeoutMs);
    let response: Response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.any([signal, timeout]),
      });
    } catch (error) {
      if (timeout.aborted)
        throw new WebhookDeliveryError(`${url.host} did not answer within ${timeoutMs} ms`, undefined, true);
      if (signal.aborted)
        throw new WebhookDeliveryError("the delivery was aborted (claim expired or relay stopping)", undefined, true);
      throw new WebhookDeliveryError(`POST to ${url.host} failed: ${describeNetworkError(error)}`, undefined, true, {
        cause: error,
      });
    }
    if (response.status >= 200 && response.status < 300) {
      await response.body?.cancel().catch(() => undefined);
      return;
    }
    const text = await response.text().catch(() => "");
    const retryable =
      response.status >= 500 || response.status === 408 || response.status === 429 || response.status < 400;
    throw new WebhookDeliveryError(
      `${url.host} answered ${response.status}${text ? `: ${text.slice(0, ERROR_BODY_CHARS)}` : ""}`,
      response.status,
      retryable,
    );
  };
}

function toUrl(value: string | URL): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new RelayOptionsError(`webhook url ${JSON.stringify(String(value))} is not an absolute URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new RelayOptionsError(`webhook url must be http(s), got ${url.protocol}`);
  }
  return url;
}

function toSecrets(value: string | readonly string[]): readonly string[] {
  const secrets = typeof value === "string" ? [value] : value;
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s.length === 0)) {
    throw new RelayOptionsError("webhook secret must be a non-empty string (or a non-empty list of them)");
  }
  return secrets;
}

function describeNetworkError(error: unknown): string {
  const cause = error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined;
  if (cause?.code) return cause.code;
  if (cause?.message) return cause.message;
  return error instanceof Error ? error.message : String(error);
}
