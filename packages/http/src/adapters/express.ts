/**
 * Express 5 adapter: {@link idempotency} wraps existing route handlers,
 * {@link idempotent} is a route handler that runs a workflow. Both are thin:
 * the decisions, the stored format and the error table live in the shared
 * runtime.
 */
import { tracingChannel } from "node:diagnostics_channel";
import type { ServerResponse } from "node:http";
import type { Engine, Workflow } from "@idempo/core";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { IDEMPOTENCY_KEY_HEADER } from "../header/idempotency-key.js";
import type { BodyFacts } from "../request/body.js";
import { bodyFromBytes, bodyFromParsed, readBody } from "../request/body.js";
import { headerLines } from "../request/header-lines.js";
import type { RouteFacts } from "../request/route.js";
import { resolveTenant } from "../request/tenant.js";
import type { CapturedResponse } from "../response/envelope.js";
import type { HttpReply } from "../response/reply.js";
import { statusAllowsBody } from "../response/reply.js";
import type { IdempotencyOptions, IdempotentOptions } from "../runtime/options.js";
import { wrapSettings } from "../runtime/options.js";
import { closingIfUnread, internalErrorReply, problemHeadersToDrop } from "../runtime/send.js";
import { nodeRequestHeaders } from "../runtime/trace-context.js";
import type { WebhookOptions } from "../runtime/webhook-route.js";
import { runWebhookRoute, webhookRoute } from "../runtime/webhook-route.js";
import { markWorkflowRoute, runWorkflowRoute, workflowRoute } from "../runtime/workflow-route.js";
import type { Finished, HandlerRun } from "../runtime/wrapped-run.js";
import { startWrapped } from "../runtime/wrapped-run.js";

export type { HandlerRun } from "../runtime/wrapped-run.js";

/**
 * Middleware that runs the route handler after it once per idempotency key
 * and replays its stored response (status, allow-listed headers, body
 * bytes, plus `Idempotent-Replayed: true`) to every retry. Mount it on the
 * route, after authentication and (optionally) body parsers; without a
 * parser before it, it reads the body itself and sets `req.body` (parsed
 * JSON, or a Buffer for other media types).
 *
 * The handler's own database writes are not part of the key's
 * transaction: a crash between the handler's effect and the storing of its
 * response lets a retry run it again once the lease expires. Use
 * {@link idempotent} with a workflow when that matters.
 *
 * Only what a route handler answered is stored: a request no route takes
 * (mounted with `app.use()`) and an error passed to Express's error
 * handling after this middleware go out unstored and release the claim.
 *
 * Inside the handler, `res.locals.idempotency` is the {@link HandlerRun}.
 *
 * @example
 * app.post('/orders', express.json(), idempotency(engine, { tenant: (req) => req.user?.accountId, required: true }),
 *   async (req, res) => { res.status(201).json(await createOrder(req.body)) })
 */
export function idempotency(engine: Engine, options: IdempotencyOptions<Request>): RequestHandler {
  const settings = wrapSettings(engine, options);
  watchRouterErrors();
  return (req, res, next) => {
    handle(req, res, next).catch(next);
  };

  async function handle(req: Request, res: Response, next: NextFunction): Promise<void> {
    const start = await startWrapped(engine, settings, {
      method: req.method,
      keyLines: headerLines(req.rawHeaders, IDEMPOTENCY_KEY_HEADER),
      headers: nodeRequestHeaders(req.headers),
      tenant: () => resolveTenant(options.tenant, req),
      route: () => routeOf(req),
      body: () => bodyOf(req, settings.maxRequestBytes),
    });
    if (start.kind === "pass") return next();
    if (start.kind === "reply") return sendReply(res, closingIfUnread(start.reply, req.httpVersionMajor));
    res.locals.idempotency = start.run satisfies HandlerRun;
    const capture = captureResponse(res, settings.maxResponseBytes);
    failedRequests.delete(req);
    next();
    const captured = await capture.done;
    // Mounted with app.use(), no route may have taken the request (Express's 404), and an error
    // anywhere after this middleware ends in an error handler's answer: neither is the handler's.
    const answered = req.route !== undefined && !failedRequests.has(req);
    let finished: Finished;
    try {
      finished = await start.finish(captured, answered);
    } catch (error) {
      // The handler has answered and `next` is spent: nothing downstream can take this error any more.
      console.error(
        "@idempo/http: storing the response failed; the key stays in flight until its lease expires",
        error,
      );
      finished = { kind: "problem", reply: internalErrorReply() };
    }
    capture.send(finished);
  }
}

/**
 * A route handler that runs `workflow` through `engine.runOnce` and answers
 * with its `{ status, body }` as JSON. Without a body parser before it, it
 * reads the body itself (up to `maxRequestBytes`, 4 MiB by default; 413
 * above it) and sets `req.body` (parsed JSON, or a Buffer for other media
 * types) before `input` runs; a parser mounted before it applies its own limit.
 *
 * @example
 * app.post('/charges', idempotent(engine, createCharge, {
 *   tenant: (req) => req.user?.accountId,
 *   input: (req) => ({ ...req.body }),
 * }))
 */
export function idempotent<In, B>(
  engine: Engine,
  workflow: Workflow<In, B>,
  options: IdempotentOptions<Request, In>,
): RequestHandler {
  const route = workflowRoute(engine, workflow, options);
  const handler: RequestHandler = (req, res, next) => {
    if (res.locals.idempotency !== undefined) {
      // Express routes after app.use(), so the middleware cannot see this route coming.
      next(
        new TypeError(
          "@idempo/http: idempotency() already claimed this request's key before it reached a workflow route; mount idempotency() on the routes it wraps instead of app-wide",
        ),
      );
      return;
    }
    runWorkflowRoute(route, {
      keyLines: headerLines(req.rawHeaders, IDEMPOTENCY_KEY_HEADER),
      headers: nodeRequestHeaders(req.headers),
      tenant: () => resolveTenant(options.tenant, req),
      readBody: async (maxBytes) => {
        // A parser mounted before the route has read the body already, under its own limit.
        if (req.body === undefined && hasBody(req) && !req.readableEnded) await bodyOf(req, maxBytes);
      },
      input: async () => options.input(req),
      location: async (run) => options.location?.(req, run),
    })
      .then((reply) => sendReply(res, closingIfUnread(reply, req.httpVersionMajor)))
      .catch(next);
  };
  return markWorkflowRoute(handler, route);
}

/**
 * A route handler for a provider's webhook: reads the raw body (up to
 * `maxRequestBytes`), lets `verify` check its signature, maps the event to
 * a signal with `signal`, and delivers it with `engine.signal`. Answers 200
 * for a signal delivered now or before (a provider's retry) and for one the
 * run will never read (it ended or expired; reported to `onUndelivered`),
 * 401/403 when verification fails, 404/409/422/400 when idempo refuses a
 * signal a retry may still deliver (see docs/durable.md). Mount it without a JSON parser before it (the
 * signature is over the bytes); after `express.raw()` it uses that Buffer.
 *
 * @example
 * app.post('/webhooks/psp', webhook(engine, {
 *   verify: ({ request, rawBody }) => psp.verifySignature(rawBody, request.get('psp-signature')),
 *   signal: ({ body }) => ({ tenantId: body.account, key: body.metadata.orderKey, name: '3ds', payload: body.result }),
 * }))
 */
export function webhook(engine: Engine, options: WebhookOptions<Request>): RequestHandler {
  const route = webhookRoute(engine, options);
  return (req, res, next) => {
    runWebhookRoute(route, {
      request: req,
      contentType: req.headers["content-type"],
      rawBody: async (maxBytes) => {
        if (Buffer.isBuffer(req.body)) return req.body;
        if (req.body !== undefined || req.readableEnded) {
          throw new TypeError(
            "@idempo/http: the webhook's body was parsed before the route, so its signature cannot be checked over the bytes received; mount no body parser before webhook() (or express.raw())",
          );
        }
        return hasBody(req) ? readBody(req, req.headers["content-length"], maxBytes) : Buffer.alloc(0);
      },
    })
      .then((reply) => sendReply(res, closingIfUnread(reply, req.httpVersionMajor)))
      .catch(next);
  };
}

/** Requests whose handling passed an error to Express's error handling (see {@link watchRouterErrors}). */
const failedRequests = new WeakSet<object>();
let watching = false;

/**
 * Learn which requests failed through the router's documented
 * diagnostics channel (`express.router.request`, router 2.3 and later,
 * which Express 5 installs): its `error` event names the request whose
 * handler or middleware threw, rejected or called `next(err)`, and every
 * error handler's invocation starts with `errorHandler` set. Express gives
 * a middleware no other way to see an error raised after it.
 */
function watchRouterErrors(): void {
  if (watching) return;
  watching = true;
  tracingChannel<object, { req?: object; errorHandler?: boolean }>("express.router.request").subscribe({
    start(ctx) {
      if (ctx.errorHandler && ctx.req) failedRequests.add(ctx.req);
    },
    end() {},
    asyncStart() {},
    asyncEnd() {},
    error(ctx) {
      if (ctx.req) failedRequests.add(ctx.req);
    },
  });
}

function routeOf(req: Request): RouteFacts {
  const queryAt = req.originalUrl.indexOf("?");
  const search = queryAt < 0 ? "" : req.originalUrl.slice(queryAt + 1);
  const pattern: unknown = req.route?.path;
  // Mounted with app.use() there is no route yet: the concrete path stands in for it.
  return pattern === undefined
    ? { method: req.method, route: `${req.baseUrl}${req.path}`, params: {}, search }
    : { method: req.method, route: `${req.baseUrl}${String(pattern)}`, params: { ...req.params }, search };
}

function hasBody(req: Request): boolean {
  return req.headers["transfer-encoding"] !== undefined || req.headers["content-length"] !== undefined;
}

async function bodyOf(req: Request, maxBytes: number): Promise<BodyFacts> {
  const type = req.headers["content-type"];
  if (req.body !== undefined) return bodyFromParsed(req.body, type);
  if (!hasBody(req)) return { kind: "none" };
  if (req.readableEnded) {
    throw new Error(
      "@idempo/http: the request body was read before the idempotency middleware but req.body is not set, so it cannot be fingerprinted; mount body parsers before the middleware or none at all",
    );
  }
  const bytes = await readBody(req, req.headers["content-length"], maxBytes);
  const facts = bodyFromBytes(bytes, type);
  // Body parsers mounted later see a finished stream and leave this alone.
  req.body = facts.kind === "value" ? facts.value : bytes.length > 0 ? bytes : undefined;
  return facts;
}

function setHeaders(res: ServerResponse, headers: HttpReply["headers"]): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value as string | string[]);
}

function sendReply(res: ServerResponse, reply: HttpReply): void {
  res.statusCode = reply.status;
  setHeaders(res, reply.headers);
  if (statusAllowsBody(reply.status)) res.setHeader("content-length", reply.body.length);
  res.end(reply.body);
}

type Chunk = string | Uint8Array | null | undefined;
type Callback = (error?: Error | null) => void;

interface Capture {
  /** Resolves when the handler ends its response. */
  readonly done: Promise<CapturedResponse>;
  /** Send the stored answer through the real socket. Writes after it are ignored. */
  send(finished: Finished): void;
}

/**
 * Hold back everything the handler writes (status, headers, body up to
 * `maxBytes`) until it has been stored. The interception stays in place
 * after the capture, so a handler that answers and then also throws cannot
 * get a second response out ahead of the stored one.
 */
function captureResponse(res: ServerResponse, maxBytes: number): Capture {
  const real = { end: res.end, writeHead: res.writeHead };
  const chunks: Buffer[] = [];
  let size = 0;
  let overflowed = false;
  let ended = false;
  let sending = false;
  let resolve!: (captured: CapturedResponse) => void;
  const done = new Promise<CapturedResponse>((r) => {
    resolve = r;
  });

  const add = (chunk: Chunk, encoding: unknown) => {
    if (chunk === null || chunk === undefined || ended) return;
    const buf =
      typeof chunk === "string"
        ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    size += buf.length;
    if (size > maxBytes) {
      overflowed = true;
      chunks.length = 0;
    } else if (!overflowed) {
      chunks.push(Buffer.from(buf));
    }
  };
  const callbackOf = (args: unknown[]) => args.find((a): a is Callback => typeof a === "function");

  const patched = res as unknown as Record<string, unknown>;
  patched.writeHead = (status: number, ...rest: unknown[]) => {
    // Node's own end() writes the head through this method: let the stored answer's through.
    if (sending) return (real.writeHead as (...args: unknown[]) => ServerResponse).call(res, status, ...rest);
    if (ended) return res;
    res.statusCode = status;
    if (typeof rest[0] === "string") res.statusMessage = rest[0];
    const headers = rest.find((a) => typeof a === "object" && a !== null);
    if (Array.isArray(headers)) {
      // [name, value, name, value, ...] or [[name, value], ...]
      const flat = headers.flat() as string[];
      for (let i = 0; i + 1 < flat.length; i += 2) res.setHeader(flat[i] as string, flat[i + 1] as string);
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) {
        if (value !== undefined) res.setHeader(name, value as string | string[]);
      }
    }
    return res;
  };
  patched.flushHeaders = () => undefined;
  patched.write = (chunk: Chunk, ...rest: unknown[]) => {
    add(chunk, rest[0]);
    const cb = callbackOf(rest);
    if (cb) process.nextTick(cb);
    return true;
  };
  patched.end = (chunk?: Chunk | Callback, ...rest: unknown[]) => {
    const cb = callbackOf([chunk, ...rest]);
    if (!ended) {
      if (typeof chunk !== "function") add(chunk, rest[0]);
      ended = true;
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(res.getHeaders())) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value : String(value);
      }
      resolve({ status: res.statusCode, headers, body: Buffer.concat(chunks), overflowed });
    }
    if (cb) process.nextTick(cb);
    return res;
  };

  return {
    done,
    send(finished) {
      if (finished.kind === "problem") {
        for (const name of problemHeadersToDrop(res.getHeaderNames())) res.removeHeader(name);
        setHeaders(res, finished.reply.headers);
        res.statusCode = finished.reply.status;
      }
      const body = finished.kind === "problem" ? finished.reply.body : finished.body;
      res.removeHeader("transfer-encoding");
      if (statusAllowsBody(res.statusCode)) res.setHeader("content-length", body.length);
      else res.removeHeader("content-length");
      sending = true;
      try {
        (real.end as (chunk: Buffer) => ServerResponse).call(res, body);
      } finally {
        sending = false;
      }
    },
  };
}
