/**
 * A webhook route: a provider's callback (a 3-D Secure confirmation, a
 * transfer that settled) turned into `engine.signal` for the run that
 * waits for it in a `.waitFor` item. The application verifies the
 * provider's signature over the raw body and maps the event to the run's
 * `{ tenantId, key, name, payload }`; the route answers 2xx for a signal
 * delivered now, and for one no retry could deliver (delivered before, for
 * a run that ended or expired: see webhook-policy.ts), which it reports
 * through `onUndelivered`; so the provider stops retrying. A problem
 * otherwise, and the provider's retry may still be delivered.
 */
import type { Engine, IdempoError, SignalResult } from "@idempo/core";
import type { OptionShape } from "@idempo/core/internal";
import { checkOptions, INTEGER, optionKind, optionShape } from "@idempo/core/internal";
import { WebhookVerificationError } from "../problem/errors.js";
import { isIdempoError, problemReply } from "../problem/problem.js";
import { bodyFromBytes } from "../request/body.js";
import type { HttpReply } from "../response/reply.js";
import { jsonReply } from "../response/reply.js";
import { maxRequestBytes } from "./options.js";
import type { UndeliveredReason } from "./webhook-policy.js";
import { acknowledgedRefusal } from "./webhook-policy.js";

export type { UndeliveredReason } from "./webhook-policy.js";

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

/** A signal the route acknowledged (2xx) without delivering it; see {@link WebhookOptions.onUndelivered}. */
export interface UndeliveredSignal<Req> {
  /** Why: `duplicate`, `run_ended` or `run_expired` (see {@link UndeliveredReason}). */
  readonly reason: UndeliveredReason;
  /** The signal `signal` mapped the event to. */
  readonly signal: WebhookSignal;
  /** The framework's request. */
  readonly request: Req;
  /**
   * The engine's refusal (a `RunStateError` for a run that ended, a
   * `RunNotFoundError` or `IdempotencyKeyExpiredError` for one past
   * retention), whose message says what the run did; undefined for a duplicate.
   */
  readonly error: IdempoError | undefined;
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
   * Called, and awaited, for each signal the route acknowledges (2xx)
   * without delivering it, so the provider stops retrying: `duplicate` (the
   * same signal was delivered before; nothing is lost), `run_ended` (the run
   * had completed: a 3-D Secure confirmation after the timeout voided the
   * payment, a canceled run; the run never reads this signal, so act on it
   * here: refund, alert), `run_expired` (the run is past retention). If it
   * throws, the request is not acknowledged: the error goes to the
   * framework's error handling (a 500), and the provider's retry calls it
   * again, so a report written here durably is never lost. (Default: a
   * `console.warn` line for `run_ended` and `run_expired`; none for duplicates.)
   */
  onUndelivered?: (event: UndeliveredSignal<Req>) => void | Promise<void>;
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

const isFunction = (v: unknown) => typeof v === "function";

/** The kinds of a webhook route's options, for the adapters that add their own (Fastify's `url`). */
export const WEBHOOK_OPTION_KINDS = {
  verify: optionKind("a function that checks the provider's signature over the raw body", isFunction),
  signal: optionKind("a function that maps a verified event to { tenantId, key, name, payload }, or null", isFunction),
  onUndelivered: optionKind("a function that records a signal acknowledged without delivery", isFunction),
  maxRequestBytes: INTEGER,
};

const WEBHOOK_OPTIONS = optionShape(WEBHOOK_OPTION_KINDS, ["verify", "signal"]);

/**
 * @param shape the options an adapter accepts (Default: {@link WebhookOptions}'s).
 * @throws TypeError on a missing engine.
 * @throws InvalidOptionError on an unknown option, a missing `verify` or `signal`, an `onUndelivered` that is not a function, or a bad `maxRequestBytes`.
 */
export function webhookRoute<Req>(
  engine: Engine,
  options: WebhookOptions<Req>,
  shape: OptionShape = WEBHOOK_OPTIONS,
): WebhookRoute<Req> {
  if (typeof engine?.signal !== "function") throw new TypeError("pass the engine made by createEngine({ db })");
  checkOptions("webhook", shape, options);
  return { engine, options, maxRequestBytes: maxRequestBytes(options) };
}

/** What is reported when the application gave no `onUndelivered`: the signals that will never be read. */
function warnUndelivered(event: UndeliveredSignal<unknown>): void {
  if (event.reason === "duplicate") return;
  const { tenantId, key, name } = event.signal;
  console.warn(
    `@idempo/http webhook: acknowledged signal '${name}' for idempotency key '${key}' (tenant '${tenantId}') ` +
      `without delivering it (${event.reason}): ${event.error?.message ?? ""}; pass onUndelivered to act on it`,
  );
}

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * Verify, map and signal one webhook request, and turn the outcome into a
 * reply: 200 `{ received: true, duplicate, woke }` for a signal delivered
 * (`duplicate: true` when the same one was delivered before), 200
 * `{ received: true, duplicate: false, woke: false, undelivered }` for one
 * the run will never read (`run_ended`, `run_expired`), 200
 * `{ received: true, ignored: true }` when `signal` returned null, and a
 * problem for a refused one: 401/403 unverified, 413 too large, 400 a body
 * that does not parse or a signal idempo refuses as input, 404 no such
 * run, 409 the run goes on but waits for this signal no more, 422 a
 * different payload for a signal already delivered, 503 the database
 * failed. Duplicates and the undelivered are reported to `onUndelivered`
 * first. Errors that are not idempo's (and the report's) propagate.
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
    const report = (reason: UndeliveredReason, error: IdempoError | undefined) =>
      (route.options.onUndelivered ?? warnUndelivered)({ reason, signal: target, request: req.request, error });
    let done: SignalResult;
    try {
      done = await route.engine.signal(target.tenantId, target.key, target.name, target.payload);
    } catch (error) {
      const reason = isIdempoError(error) ? await acknowledgedRefusal(route.engine, target, error) : undefined;
      if (reason === undefined) throw error;
      await report(reason, error as IdempoError);
      const body = { received: true, duplicate: false, woke: false, undelivered: reason };
      return jsonReply(200, JSON.stringify(body), JSON_TYPE);
    }
    if (done.expired) {
      // The run completed and its record expired: its tombstone acknowledges the signal, which changes nothing.
      await report("run_expired", undefined);
      const body = { received: true, duplicate: false, woke: false, undelivered: "run_expired" };
      return jsonReply(200, JSON.stringify(body), JSON_TYPE);
    }
    if (done.duplicate) await report("duplicate", undefined);
    return jsonReply(200, JSON.stringify({ received: true, duplicate: done.duplicate, woke: done.woke }), JSON_TYPE);
  } catch (error) {
    if (isIdempoError(error)) return problemReply(error);
    throw error;
  }
}
