/**
 * A webhook route: a provider's callback (a 3-D Secure confirmation, a
 * transfer that settled) turned into `engine.signal` for the run that
 * waits for it in a `.waitFor` item. The application verifies the
 * provider's signature over the raw body and maps the event to the run's
 * `{ tenantId, key, name, payload }`; the route answers 2xx for a signal
 * delivered now and for one delivered before (a provider retrying the same
 * event), so the provider stops retrying, and a problem otherwise.
 */
import type { Engine } from "@idempo/core";
import { WebhookVerificationError } from "../problem/errors.js";
import { isIdempoError, problemReply } from "../problem/problem.js";
import { bodyFromBytes } from "../request/body.js";
import type { HttpReply } from "../response/reply.js";
import { jsonReply } from "../response/reply.js";
import { maxRequestBytes } from "./options.js";

/** The signal a webhook delivers: which run, which `.waitFor` item, and the JSON payload merged into its state. */
export interface WebhookSignal {
  /** The tenant of the run, as the verified event tells it (an account id in the payload, the endpoint's secret). */
  readonly tenantId: string;
  /** The idempotency key of the run that waits. */
  readonly key: string;
  /** The `.waitFor` item's name. */
  readonly name: string;
  /** The payload: JSON values only; the same payload again counts once. */
  readonly payload: unknown;
}

/** One webhook request as the application's functions see it. */
export interface WebhookEvent<Req> {
  /** The framework's request (headers carry the provider's signature). */
  readonly request: Req;
  /** The body exactly as received, the bytes a signature is computed over. */
  readonly rawBody: Buffer;
}

/** A verified webhook request: also its body, parsed. */
export interface VerifiedWebhookEvent<Req> extends WebhookEvent<Req> {
  /** The body parsed as JSON when its media type is JSON (`application/json`, `*+json`), else undefined. */
  readonly body: unknown;
}

/** Options of a webhook route. */
export interface WebhookOptions<Req> {
  /**
   * Check the provider's signature over `rawBody` (HMAC with the endpoint's
   * secret, a public-key signature, a timestamp tolerance): return true for
   * a genuine request. False answers 401 `webhook_unverified`; throw a
   * `WebhookVerificationError(403)` for a genuine request that may not do
   * this (403 `webhook_forbidden`). Any other error thrown goes to the
   * framework's error handling (500): a library that throws on a bad
   * signature should be caught here and answered with false. Required.
   */
  verify: (event: WebhookEvent<Req>) => boolean | Promise<boolean>;
  /**
   * Map the verified event to the signal it delivers, or return null for an
   * event this endpoint does not act on (answered 200, nothing signalled,
   * so the provider stops sending it). An `IdempoError` thrown here (say an
   * `InputValidationError` for a payload that makes no sense) is answered
   * with its status. Required.
   */
  signal: (event: VerifiedWebhookEvent<Req>) => WebhookSignal | null | Promise<WebhookSignal | null>;
  /**
   * Largest request body read, in bytes; a larger one gets 413
   * `request_too_large` before `verify` runs (Default: 4 194 304, 4 MiB).
   */
  maxRequestBytes?: number;
}

/** Settings of a webhook route, checked once when it is built. */
export interface WebhookRoute<Req> {
  readonly engine: Engine;
  readonly options: WebhookOptions<Req>;
  readonly maxRequestBytes: number;
}

/** A webhook request as the route needs it; the adapter fills it in. */
export interface WebhookRequest<Req> {
  readonly request: Req;
  readonly contentType: string | undefined;
  /** The body bytes, read within `maxBytes` (413 above it); empty when there is no body. */
  rawBody(maxBytes: number): Promise<Buffer>;
}

/** @throws TypeError on a missing engine, `verify` or `signal`, or a bad `maxRequestBytes`. */
export function webhookRoute<Req>(engine: Engine, options: WebhookOptions<Req>): WebhookRoute<Req> {
  if (typeof engine?.signal !== "function") throw new TypeError("pass the engine made by createEngine({ db })");
  if (typeof options?.verify !== "function") {
    throw new TypeError(
      "options.verify is required: a function that checks the provider's signature over the raw body",
    );
  }
  if (typeof options.signal !== "function") {
    throw new TypeError(
      "options.signal is required: a function that maps a verified event to { tenantId, key, name, payload }, or null",
    );
  }
  return { engine, options, maxRequestBytes: maxRequestBytes(options) };
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Verify, map and signal one webhook request, and turn the outcome into a
 * reply: 200 `{ received: true, duplicate, woke }` for a signal delivered
 * (`duplicate: true` when the same one was delivered before), 200
 * `{ received: true, ignored: true }` when `signal` returned null, and a
 * problem for a refused one: 401/403 unverified, 413 too large, 400 a body
 * that does not parse or a signal idempo refuses as input, 404 no such
 * run, 409 the run completed before this new signal, 422 a different
 * payload for a signal already delivered, 503 the database failed.
 * Errors that are not idempo's propagate.
 */
export async function runWebhookRoute<Req>(route: WebhookRoute<Req>, req: WebhookRequest<Req>): Promise<HttpReply> {
  try {
    const rawBody = await req.rawBody(route.maxRequestBytes);
    const event: WebhookEvent<Req> = { request: req.request, rawBody };
    if ((await route.options.verify(event)) !== true) throw new WebhookVerificationError(401);
    // Parsed only once the request is known to come from the provider.
    const facts = bodyFromBytes(rawBody, req.contentType);
    const body = facts.kind === "value" ? facts.value : undefined;
    const target = await route.options.signal({ ...event, body });
    if (target === null || target === undefined) {
      return jsonReply(200, JSON.stringify({ received: true, ignored: true }), JSON_TYPE);
    }
    const done = await route.engine.signal(target.tenantId, target.key, target.name, target.payload);
    return jsonReply(200, JSON.stringify({ received: true, duplicate: done.duplicate, woke: done.woke }), JSON_TYPE);
  } catch (error) {
    if (isIdempoError(error)) return problemReply(error);
    throw error;
  }
}
