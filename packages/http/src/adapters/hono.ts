/**
 * Hono 4 adapter: {@link idempotency} middleware wraps existing route
 * handlers, {@link idempotent} is a route handler that runs a workflow. Both
 * are thin: the decisions, the stored format and the error table live in
 * the shared runtime.
 */
import type { Engine, Workflow } from "@idempo/core";
import type { Context, Env, Handler, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { IDEMPOTENCY_KEY_HEADER } from "../header/idempotency-key.js";
import type { BodyFacts } from "../request/body.js";
import { bodyFromBytes } from "../request/body.js";
import { headerLines } from "../request/header-lines.js";
import type { RouteFacts } from "../request/route.js";
import { resolveTenant } from "../request/tenant.js";
import type { IdempotencyOptions, IdempotentOptions } from "../runtime/options.js";
import { wrapSettings } from "../runtime/options.js";
import { closingIfUnread } from "../runtime/send.js";
import type { WebhookOptions } from "../runtime/webhook-route.js";
import { runWebhookRoute, webhookRoute } from "../runtime/webhook-route.js";
import { isWorkflowRoute, markWorkflowRoute, runWorkflowRoute, workflowRoute } from "../runtime/workflow-route.js";
import type { HandlerRun } from "../runtime/wrapped-run.js";
import { startWrapped } from "../runtime/wrapped-run.js";
import { captureResponse, fetchRequestHeaders, finishedResponse, readFetchBody, toResponse } from "./fetch-response.js";

export type { HandlerRun } from "../runtime/wrapped-run.js";

/** Add to your app's `Variables` to read `c.get('idempotency')` in a wrapped handler with its type. */
export interface IdempotencyVariables {
  idempotency?: HandlerRun;
}

/**
 * Middleware that runs the route handler after it once per idempotency key
 * and replays its stored response (status, allow-listed headers, body
 * bytes, plus `Idempotent-Replayed: true`) to every retry. It reads the
 * request body itself (up to `maxRequestBytes`); `c.req.json()` and
 * friends still work in the handler.
 *
 * The handler's own database writes are not part of the key's transaction;
 * use {@link idempotent} with a workflow when a crash must never run the
 * handler twice. Inside the handler, `c.get('idempotency')` is the {@link HandlerRun}.
 *
 * @example
 * app.post('/orders', idempotency(engine, { tenant: (c) => c.get('accountId'), required: true }),
 *   async (c) => c.json(await createOrder(await c.req.json()), 201))
 */
export function idempotency<E extends Env = Env>(
  engine: Engine,
  options: IdempotencyOptions<Context<E>>,
): MiddlewareHandler<E> {
  const settings = wrapSettings(engine, options);
  return async (c, next) => {
    const target = targetOf(c);
    // Mounted app-wide, it leaves workflow routes to their workflow, and requests no route answers.
    if (target.handler === undefined || isWorkflowRoute(target.handler)) return next();
    const start = await startWrapped(engine, settings, {
      method: c.req.method,
      keyLines: keyLinesOf(c),
      headers: fetchRequestHeaders(c.req.raw.headers),
      tenant: () => resolveTenant(options.tenant, c),
      route: () => target.route,
      body: () => bodyOf(c, settings.maxRequestBytes),
    });
    if (start.kind === "pass") return next();
    if (start.kind === "reply") return toResponse(closingIfUnread(start.reply, incomingOf(c)?.httpVersionMajor));
    (c.set as (key: string, value: unknown) => void)("idempotency", start.run);
    try {
      await next();
    } catch (error) {
      await start.abandon();
      throw error;
    }
    const original = c.res;
    // Hono turns an error thrown after this middleware into its onError answer and records it as
    // c.error: that answer is the framework's, not the handler's, and is never stored.
    const answered = c.error === undefined;
    const finished = await start.finish(await captureResponse(original, settings.maxResponseBytes), answered);
    const answer = finishedResponse(original, finished);
    // Cleared first: assigning over a response merges the old one's headers in.
    c.res = undefined;
    c.res = answer;
  };
}

/**
 * A route handler that runs `workflow` through `engine.runOnce` and answers
 * with its `{ status, body }` as JSON.
 *
 * @example
 * app.post('/charges', idempotent(engine, createCharge, {
 *   tenant: (c) => c.get('accountId'),
 *   input: (c) => c.req.json(),
 * }))
 */
export function idempotent<In, B, E extends Env = Env>(
  engine: Engine,
  workflow: Workflow<In, B>,
  options: IdempotentOptions<Context<E>, In>,
): Handler<E> {
  const route = workflowRoute(engine, workflow, options);
  const handler: Handler<E> = async (c) =>
    toResponse(
      closingIfUnread(
        await runWorkflowRoute(route, {
          keyLines: keyLinesOf(c),
          headers: fetchRequestHeaders(c.req.raw.headers),
          tenant: () => resolveTenant(options.tenant, c),
          readBody: async (maxBytes) => {
            await cacheBody(c, maxBytes);
          },
          input: async () => options.input(c),
          location: async (run) => options.location?.(c, run),
        }),
        incomingOf(c)?.httpVersionMajor,
      ),
    );
  return markWorkflowRoute(handler, route);
}

/**
 * A route handler for a provider's webhook: reads the raw body (up to
 * `maxRequestBytes`), lets `verify` check its signature, maps the event to
 * a signal with `signal`, and delivers it with `engine.signal`. Answers 200
 * for a signal delivered now or before (a provider's retry) and for one the
 * run will never read (it ended or expired; reported to `onUndelivered`),
 * 401/403 when verification fails, 404/409/422/400 when idempo refuses a
 * signal a retry may still deliver (see docs/durable.md). Middleware made by {@link idempotency} leaves it alone.
 *
 * @example
 * app.post('/webhooks/psp', webhook(engine, {
 *   verify: ({ request: c, rawBody }) => psp.verifySignature(rawBody, c.req.header('psp-signature')),
 *   signal: ({ body }) => ({ tenantId: body.account, key: body.metadata.orderKey, name: '3ds', payload: body.result }),
 * }))
 */
export function webhook<E extends Env = Env>(engine: Engine, options: WebhookOptions<Context<E>>): Handler<E> {
  const route = webhookRoute(engine, options);
  const handler: Handler<E> = async (c) =>
    toResponse(
      closingIfUnread(
        await runWebhookRoute(route, {
          request: c,
          contentType: c.req.header("content-type"),
          rawBody: async (maxBytes) => {
            const bytes = await cacheBody(c, maxBytes);
            if (bytes !== undefined) return bytes;
            // Read before (by a middleware through c.req): Hono serves the bytes from its cache.
            return c.req.raw.bodyUsed ? Buffer.from(await c.req.arrayBuffer()) : Buffer.alloc(0);
          },
        }),
        incomingOf(c)?.httpVersionMajor,
      ),
    );
  return markWorkflowRoute(handler, route);
}

/** Node's request when served by @hono/node-server. */
function incomingOf(c: Context): { rawHeaders?: unknown; httpVersionMajor?: number } | undefined {
  return (c.env as { incoming?: { rawHeaders?: unknown; httpVersionMajor?: number } } | undefined)?.incoming;
}

/** Header lines from Node's raw headers when served by @hono/node-server (repeats stay visible), else the joined value. */
function keyLinesOf(c: Context): string[] {
  const incoming = incomingOf(c);
  if (Array.isArray(incoming?.rawHeaders)) return headerLines(incoming.rawHeaders as string[], IDEMPOTENCY_KEY_HEADER);
  const value = c.req.raw.headers.get(IDEMPOTENCY_KEY_HEADER);
  return value === null ? [] : [value];
}

/** The route this request goes to: the first one from this middleware on that is registered for its method. */
function targetOf(c: Context): { route: RouteFacts; handler: unknown } {
  const search = new URL(c.req.url).search.slice(1);
  const routes = matchedRoutes(c);
  const here = c.req.routeIndex;
  for (let i = here; i < routes.length; i++) {
    const route = routes[i];
    if (route?.method !== c.req.method) continue;
    // param() reads the parameters of the route at routeIndex.
    c.req.routeIndex = i;
    try {
      const params = { ...c.req.param() };
      // A route's last handler is the one that answers (the ones before it are its middleware).
      let last = route;
      for (
        let j = i + 1;
        j < routes.length && routes[j]?.path === route.path && routes[j]?.method === route.method;
        j++
      ) {
        last = routes[j] as typeof route;
      }
      return { route: { method: c.req.method, route: route.path, params, search }, handler: last.handler };
    } finally {
      c.req.routeIndex = here;
    }
  }
  return { route: { method: c.req.method, route: c.req.path, params: {}, search }, handler: undefined };
}

async function bodyOf(c: Context, maxBytes: number): Promise<BodyFacts> {
  const type = c.req.header("content-type");
  // Read by an earlier middleware through c.req: Hono rebuilds the bytes from its body cache.
  if (c.req.raw.bodyUsed) return bodyFromBytes(new Uint8Array(await c.req.arrayBuffer()), type);
  const bytes = await cacheBody(c, maxBytes);
  return bytes === undefined ? { kind: "none" } : bodyFromBytes(bytes, type);
}

/**
 * Read the raw body within `maxBytes` into Hono's body cache, so the
 * handler's c.req.json() / text() / arrayBuffer() are served from it.
 * Nothing to do when there is no body or something has read it already.
 */
async function cacheBody(c: Context, maxBytes: number): Promise<Buffer | undefined> {
  const raw = c.req.raw;
  if (raw.bodyUsed || raw.body === null) return undefined;
  const bytes = await readFetchBody(raw.body, c.req.header("content-length"), maxBytes);
  (c.req.bodyCache as Record<string, unknown>).arrayBuffer = Promise.resolve(
    bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength),
  );
  return bytes;
}
