/**
 * The framework-free adapter, on the standard Fetch API `Request` and
 * `Response`: for Next.js App Router route handlers, Bun and Deno servers,
 * and anything else that hands a `Request` to a function and sends back the
 * `Response` it returns. {@link idempotency} wraps an existing handler,
 * {@link idempotent} is a handler that runs a workflow, {@link webhook}
 * delivers a provider's callback as a signal. The decisions, the stored
 * format and the error table are the shared runtime's, as on Express,
 * Fastify and Hono.
 *
 * A Fetch `Request` has no route pattern: the fingerprint of a wrapped
 * handler covers the method, the URL's path and query, and the body. Its
 * `Headers` join repeated header lines with a comma, so two
 * `Idempotency-Key` lines reach the handler as one comma-joined value
 * (refused, unless the two halves form one quoted string).
 */
import type { Engine, Workflow } from "@idempo/core";
import { IDEMPOTENCY_KEY_HEADER } from "../header/idempotency-key.js";
import type { BodyFacts } from "../request/body.js";
import { bodyFromBytes } from "../request/body.js";
import { resolveTenant } from "../request/tenant.js";
import type { IdempotencyOptions, IdempotentOptions } from "../runtime/options.js";
import { wrapSettings } from "../runtime/options.js";
import type { WebhookOptions } from "../runtime/webhook-route.js";
import { runWebhookRoute, webhookRoute } from "../runtime/webhook-route.js";
import { runWorkflowRoute, workflowRoute } from "../runtime/workflow-route.js";
import type { HandlerRun } from "../runtime/wrapped-run.js";
import { startWrapped } from "../runtime/wrapped-run.js";
import { captureResponse, fetchRequestHeaders, finishedResponse, readFetchBody, toResponse } from "./fetch-response.js";

export type { HandlerRun } from "../runtime/wrapped-run.js";

/**
 * A handler that {@link idempotency} wraps: the request, the run it
 * executes in (`undefined` when the request passed through: no key where
 * none is required, or a method the options leave out), and whatever else
 * the caller passes (Next.js passes `{ params }`).
 */
export type WrappedHandler<A extends unknown[]> = (
  request: Request,
  run: HandlerRun | undefined,
  ...rest: A
) => Response | Promise<Response>;

/**
 * Wrap a Fetch handler so it runs once per idempotency key, and every retry
 * gets its stored response replayed (status, allow-listed headers, body
 * bytes, plus `Idempotent-Replayed: true`; a stored content coding the
 * retry does not accept is decoded, 406 when it cannot be). A retry while
 * the first runs gets 409 `key_in_progress`, the same key with another
 * method, path, query or body 422 `key_mismatch`, a malformed key 400
 * `invalid_key`, all as `application/problem+json`.
 *
 * The wrapper reads the body (up to `maxRequestBytes`, 413 above it) from a
 * clone of the request, so the handler gets the request itself, unread,
 * subclass (Next.js `NextRequest`) included. A handler that throws stores
 * nothing and releases the key; the error propagates to the caller. The
 * handler's own database writes are not part of the key's transaction: use
 * {@link idempotent} with a workflow when a crash must never run it twice.
 *
 * @param engine the engine that holds the keys.
 * @param options the same options as the other adapters' middleware; `tenant` gets the request.
 * @param handler `(request, run, ...rest)`, answering a `Response`.
 * @returns `(request, ...rest) => Promise<Response>`.
 * @throws InvalidOptionError (at once) for an unknown or malformed option.
 *
 * @example
 * ```ts
 * // app/api/orders/route.ts (Next.js App Router): `export const POST = ...`
 * const accountOf = (request: Request) => request.headers.get("x-account") ?? undefined; // your authentication
 * const POST = idempotency(engine, { tenant: accountOf, required: true }, async (request, run) => {
 *   const order = (await request.json()) as { amountCents: number };
 *   const charge = await payments.charge(order.amountCents, {
 *     idempotencyKey: run?.derivedKey ?? crypto.randomUUID(),
 *     signal: request.signal,
 *   });
 *   return Response.json({ chargeId: charge.id }, { status: 201 });
 * });
 * ```
 */
export function idempotency<A extends unknown[] = []>(
  engine: Engine,
  options: IdempotencyOptions<Request>,
  handler: WrappedHandler<A>,
): (request: Request, ...rest: A) => Promise<Response> {
  const settings = wrapSettings(engine, options);
  if (typeof handler !== "function") throw new TypeError("idempotency: pass the handler to wrap as the third argument");
  return async (request, ...rest) => {
    const url = new URL(request.url);
    const start = await startWrapped(engine, settings, {
      method: request.method,
      keyLines: keyLinesOf(request),
      headers: fetchRequestHeaders(request.headers),
      tenant: () => resolveTenant(options.tenant, request),
      route: () => ({
        method: request.method.toUpperCase(),
        route: url.pathname,
        params: {},
        search: url.search.slice(1),
      }),
      body: () => bodyOf(request, settings.maxRequestBytes),
    });
    if (start.kind === "pass") return handler(request, undefined, ...rest);
    if (start.kind === "reply") return toResponse(start.reply);
    let original: Response;
    try {
      original = await handler(request, start.run, ...rest);
    } catch (error) {
      await start.abandon();
      throw error;
    }
    const finished = await start.finish(await captureResponse(original, settings.maxResponseBytes));
    return finishedResponse(original, finished);
  };
}

/**
 * A Fetch handler that runs `workflow` through `engine.runOnce` and answers
 * with its `{ status, body }` as JSON, the same bytes on every replay; 202
 * with `Retry-After` (and `Location` with the `location` option) for a run
 * that suspended. `input` gets the request with its body unread (checked
 * against `maxRequestBytes` first).
 *
 * @param engine the engine that runs the workflow.
 * @param workflow a workflow built with `workflow(...).respond(...)`.
 * @param options the same options as the other adapters' `idempotent`; `tenant`, `input` and `location` get the request.
 * @returns `(request) => Promise<Response>`.
 * @throws InvalidOptionError (at once) for an unknown or malformed option; TypeError without a workflow.
 *
 * @example
 * ```ts
 * // app/api/checkout/route.ts (Next.js App Router): `export const POST = ...`
 * const POST = idempotent(engine, checkout, {
 *   tenant: (request) => request.headers.get("x-account") ?? undefined, // your authentication
 *   input: async (request) => (await request.json()) as { cartId: string; amountCents: number },
 * });
 * // Bun: Bun.serve({ fetch: POST }); Deno: Deno.serve(POST)
 * ```
 */
export function idempotent<In, B>(
  engine: Engine,
  workflow: Workflow<In, B>,
  options: IdempotentOptions<Request, In>,
): (request: Request) => Promise<Response> {
  const route = workflowRoute(engine, workflow, options);
  return async (request: Request) =>
    toResponse(
      await runWorkflowRoute(route, {
        keyLines: keyLinesOf(request),
        headers: fetchRequestHeaders(request.headers),
        tenant: () => resolveTenant(options.tenant, request),
        readBody: async (maxBytes) => {
          await bytesOf(request, maxBytes);
        },
        input: async () => options.input(request),
        location: async (run) => options.location?.(request, run),
      }),
    );
}

/**
 * A Fetch handler for a provider's webhook: reads the raw body (up to
 * `maxRequestBytes`), lets `verify` check its signature, maps the event to
 * a signal with `signal`, and delivers it with `engine.signal`. Answers 200
 * for a signal delivered now or before (a provider's retry) and for one the
 * run will never read (reported to `onUndelivered`), 401/403 when
 * verification fails, 404/409/422/400 when idempo refuses a signal a retry
 * may still deliver (see docs/durable.md).
 *
 * @param engine the engine whose runs wait for the signal.
 * @param options `verify`, `signal`, and optionally `onUndelivered` and `maxRequestBytes`; each function gets `{ request, rawBody }`.
 * @returns `(request) => Promise<Response>`.
 * @throws InvalidOptionError (at once) for an unknown or malformed option.
 *
 * @example
 * ```ts
 * // app/api/webhooks/psp/route.ts
 * const signatureOf = (body: Buffer) => `sha-of-${body.length}`; // the provider's signature scheme
 * const POST = webhook(engine, {
 *   verify: ({ request, rawBody }) => request.headers.get("psp-signature") === signatureOf(rawBody),
 *   signal: ({ body }) => {
 *     const event = body as { account: string; orderKey: string; result: string };
 *     return { tenantId: event.account, key: event.orderKey, name: "3ds", payload: { result: event.result } };
 *   },
 * });
 * ```
 */
export function webhook(engine: Engine, options: WebhookOptions<Request>): (request: Request) => Promise<Response> {
  const route = webhookRoute(engine, options);
  return async (request: Request) =>
    toResponse(
      await runWebhookRoute(route, {
        request,
        contentType: request.headers.get("content-type") ?? undefined,
        rawBody: async (maxBytes) => (await bytesOf(request, maxBytes)) ?? Buffer.alloc(0),
      }),
    );
}

/** The key header as Fetch gives it: repeated lines arrive joined with a comma, which the parser refuses. */
function keyLinesOf(request: Request): string[] {
  const value = request.headers.get(IDEMPOTENCY_KEY_HEADER);
  return value === null ? [] : [value];
}

/**
 * The body bytes within `maxBytes` (413 above), read from a clone so the
 * request stays unread for the handler; undefined without a body.
 * @throws TypeError when something read the body before.
 */
async function bytesOf(request: Request, maxBytes: number): Promise<Buffer | undefined> {
  if (request.body === null) return undefined;
  if (request.bodyUsed) throw new TypeError("the request body was read before the idempotency handler could read it");
  const copy = request.clone();
  return readFetchBody(copy.body as ReadableStream<Uint8Array>, request.headers.get("content-length"), maxBytes);
}

async function bodyOf(request: Request, maxBytes: number): Promise<BodyFacts> {
  const bytes = await bytesOf(request, maxBytes);
  return bytes === undefined ? { kind: "none" } : bodyFromBytes(bytes, request.headers.get("content-type"));
}
