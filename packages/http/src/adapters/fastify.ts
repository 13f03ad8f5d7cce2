/**
 * Fastify 5 adapter: the {@link idempotency} plugin wraps existing route
 * handlers, {@link idempotent} is a route handler that runs a workflow. Both
 * are thin: the decisions, the stored format and the error table live in
 * the shared runtime.
 */
import { Readable } from "node:stream";
import type { Engine, Workflow } from "@idempo/core";
import { InvalidOptionError } from "@idempo/core";
import { checkOptions, describeValue, optionKind, optionShape } from "@idempo/core/internal";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteHandlerMethod } from "fastify";
import { IDEMPOTENCY_KEY_HEADER } from "../header/idempotency-key.js";
import { RequestBodyTooLargeError } from "../problem/errors.js";
import { problemReply } from "../problem/problem.js";
import { bodyFromParsed } from "../request/body.js";
import { headerLines } from "../request/header-lines.js";
import type { RouteFacts } from "../request/route.js";
import { resolveTenant } from "../request/tenant.js";
import type { CapturedResponse } from "../response/envelope.js";
import type { HttpReply } from "../response/reply.js";
import { statusAllowsBody } from "../response/reply.js";
import type { IdempotencyOptions, IdempotentOptions, WrapSettings } from "../runtime/options.js";
import { ROUTE_IDEMPOTENCY_OPTIONS, wrapSettings } from "../runtime/options.js";
import { problemHeadersToDrop } from "../runtime/send.js";
import { nodeRequestHeaders } from "../runtime/trace-context.js";
import type { WebhookOptions } from "../runtime/webhook-route.js";
import { runWebhookRoute, WEBHOOK_OPTION_KINDS, webhookRoute } from "../runtime/webhook-route.js";
import { markWorkflowRoute, runWorkflowRoute, workflowRoute, workflowRouteLimit } from "../runtime/workflow-route.js";
import type { HandlerRun, WrappedStart } from "../runtime/wrapped-run.js";
import { startWrapped } from "../runtime/wrapped-run.js";

export type { HandlerRun } from "../runtime/wrapped-run.js";

/** Per-route settings in a route's `config.idempotency`; they override the plugin's. */
export type RouteIdempotency = Pick<
  IdempotencyOptions<FastifyRequest>,
  "required" | "replayHeaders" | "maxRequestBytes" | "maxResponseBytes" | "storeResponse" | "leaseMs" | "retentionMs"
>;

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * `false`: this route never takes part. `true` or an object: it takes
     * part whatever its method, with these settings over the plugin's.
     * Unset: it takes part when its method is in the plugin's `methods`.
     */
    idempotency?: boolean | RouteIdempotency;
  }
  interface FastifyRequest {
    /** The run a wrapped handler executes in, or null when the request is not idempotent. */
    idempotency: HandlerRun | null;
  }
}

/**
 * Options of the Fastify plugin. `maxRequestBytes` becomes the `bodyLimit`
 * of each route the plugin covers (and of workflow routes registered after
 * it, with their own `maxRequestBytes`) unless the route sets `bodyLimit`.
 */
export type FastifyIdempotencyOptions = IdempotencyOptions<FastifyRequest>;

type Execution = Extract<WrappedStart, { kind: "execute" }>;

/**
 * A plugin that runs each matching route handler once per idempotency key
 * and replays its stored response (status, allow-listed headers, body
 * bytes, plus `Idempotent-Replayed: true`) to every retry. It applies to
 * the routes registered after it in the same scope (it does not
 * encapsulate), except routes made with {@link idempotent}, which handle
 * the key themselves. Authenticate in an `onRequest` or `preValidation` hook: the
 * plugin resolves the tenant in `preHandler`, after validation.
 *
 * The handler's own database writes are not part of the key's transaction;
 * use {@link idempotent} with a workflow when a crash must never run the
 * handler twice. Inside the handler, `request.idempotency` is the {@link HandlerRun}.
 *
 * @example
 * await app.register(idempotency(engine, { tenant: (req) => req.user?.accountId }))
 * app.post('/orders', { config: { idempotency: { required: true } } }, async (req, reply) => reply.code(201).send(order))
 */
export function idempotency(engine: Engine, options: FastifyIdempotencyOptions): FastifyPluginAsync {
  const base = wrapSettings(engine, options);
  const byRoute = new WeakMap<object, WrapSettings | null>();
  const executions = new WeakMap<FastifyRequest, { execution: Execution; maxBytes: number }>();
  const replays = new WeakMap<FastifyRequest, HttpReply>();
  // Requests whose route handler was called, and those an error went through: only a handler's
  // own reply is stored, never a hook's or the error handler's.
  const handled = new WeakSet<FastifyRequest>();
  const failed = new WeakSet<FastifyRequest>();

  const settingsOf = (request: FastifyRequest): WrapSettings | null => {
    // No route answers a 404: nothing to run once.
    if (request.is404) return null;
    const config = request.routeOptions.config;
    if (typeof config !== "object" || config === null) return base;
    let settings = byRoute.get(config);
    if (settings === undefined) {
      const own = config.idempotency;
      settings =
        own === false
          ? null
          : own === undefined
            ? base
            : wrapSettings(engine, { ...options, ...(own === true ? {} : own), methods: routeMethods(request) });
      byRoute.set(config, settings);
    }
    return settings;
  };

  const plugin: FastifyPluginAsync = async (app) => {
    app.decorateRequest("idempotency", null);
    // Fastify binds handlers when it registers them, so workflow routes are told apart here.
    app.addHook("onRoute", (route) => {
      const flowLimit = workflowRouteLimit(route.handler);
      if (flowLimit !== undefined) {
        route.config = { ...route.config, idempotency: false };
        route.bodyLimit ??= flowLimit;
        return;
      }
      const own = (route.config as { idempotency?: boolean | RouteIdempotency } | undefined)?.idempotency;
      // Checked when the route is registered, not at its first request.
      if (typeof own !== "boolean") checkOptions("config.idempotency", ROUTE_IDEMPOTENCY_OPTIONS, own);
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const covered = own === undefined ? methods.some((m) => base.methods.has(m.toUpperCase())) : own !== false;
      if (!covered) return;
      const limit =
        typeof own === "object" && own.maxRequestBytes !== undefined ? own.maxRequestBytes : base.maxRequestBytes;
      route.bodyLimit ??= limit;
      const handler = route.handler;
      route.handler = function handledOnce(this: unknown, request, reply) {
        handled.add(request);
        return (handler as (...args: unknown[]) => unknown).call(this, request, reply);
      } as typeof route.handler;
    });

    app.addHook("onError", async (request) => {
      failed.add(request);
    });

    app.addHook("preHandler", async (request, reply) => {
      const settings = settingsOf(request);
      if (!settings) return;
      const start = await startWrapped(engine, settings, {
        method: request.method,
        keyLines: headerLines(request.raw.rawHeaders, IDEMPOTENCY_KEY_HEADER),
        headers: nodeRequestHeaders(request.headers),
        tenant: () => resolveTenant(options.tenant, request),
        route: () => routeOf(request),
        body: async () => bodyFromParsed(request.body, request.headers["content-type"]),
      });
      if (start.kind === "pass") return;
      if (start.kind === "reply") {
        replays.set(request, start.reply);
        return sendReply(reply, start.reply);
      }
      request.idempotency = start.run;
      executions.set(request, { execution: start, maxBytes: settings.maxResponseBytes });
    });

    app.addHook("onSend", async (request, reply, payload) => {
      const replayed = replays.get(request);
      if (replayed) {
        // reply.send(Buffer) adds a default content type the stored response may not have had.
        if (replayed.headers["content-type"] === undefined) reply.removeHeader("content-type");
        return payload;
      }
      const pending = executions.get(request);
      if (!pending) return payload;
      executions.delete(request);
      const captured = await capturePayload(reply, payload, pending.maxBytes);
      const answered = handled.has(request) && !failed.has(request);
      const finished = await pending.execution.finish(captured, answered);
      if (finished.kind === "stored") {
        if (statusAllowsBody(reply.statusCode)) reply.header("content-length", finished.body.length);
        return finished.body;
      }
      const problem = finished.reply;
      for (const name of problemHeadersToDrop(Object.keys(reply.getHeaders()))) reply.removeHeader(name);
      reply.code(problem.status).headers(problem.headers as Record<string, string | string[]>);
      reply.header("content-length", problem.body.length);
      return problem.body;
    });
  };
  // Apply to the routes of the scope the plugin is registered in, as fastify-plugin does.
  Object.assign(plugin, {
    [Symbol.for("skip-override")]: true,
    [Symbol.for("fastify.display-name")]: "@idempo/http",
  });
  return plugin;
}

/**
 * A route handler that runs `workflow` through `engine.runOnce` and answers
 * with its `{ status, body }` as JSON.
 *
 * @example
 * app.post('/charges', idempotent(engine, createCharge, {
 *   tenant: (req) => req.user?.accountId,
 *   input: (req) => req.body,
 * }))
 */
export function idempotent<In, B>(
  engine: Engine,
  workflow: Workflow<In, B>,
  options: IdempotentOptions<FastifyRequest, In>,
): RouteHandlerMethod {
  const route = workflowRoute(engine, workflow, options);
  const handler: RouteHandlerMethod = async (request, reply) => {
    const answer = await runWorkflowRoute(route, {
      keyLines: headerLines(request.raw.rawHeaders, IDEMPOTENCY_KEY_HEADER),
      headers: nodeRequestHeaders(request.headers),
      tenant: () => resolveTenant(options.tenant, request),
      input: async () => options.input(request),
      location: async (run) => options.location?.(request, run),
    });
    return sendReply(reply, answer);
  };
  return markWorkflowRoute(handler, route);
}

/** Options of the Fastify webhook plugin: the route's `url` and the webhook's settings. */
export interface FastifyWebhookOptions extends WebhookOptions<FastifyRequest> {
  /** The path of the POST route the plugin adds, e.g. `/webhooks/psp` (under the prefix it is registered with). */
  url: string;
}

const FASTIFY_WEBHOOK_OPTIONS = optionShape(
  {
    ...WEBHOOK_OPTION_KINDS,
    url: optionKind("the webhook route's path, starting with '/'", (v) => typeof v === "string"),
  },
  ["verify", "signal", "url"],
);

/**
 * A plugin that adds one POST route for a provider's webhook: the body is
 * kept as raw bytes (its own content-type parser, in the plugin's scope
 * only, within `maxRequestBytes`), `verify` checks its signature, `signal`
 * maps the event to a signal, and `engine.signal` delivers it. Answers 200
 * for a signal delivered now or before (a provider's retry) and for one the
 * run will never read (it ended or expired; reported to `onUndelivered`),
 * 401/403 when verification fails, 404/409/422/400 when idempo refuses a
 * signal a retry may still deliver (see docs/durable.md). The idempotency plugin leaves the route alone.
 *
 * @example
 * await app.register(webhook(engine, {
 *   url: '/webhooks/psp',
 *   verify: ({ request, rawBody }) => psp.verifySignature(rawBody, request.headers['psp-signature']),
 *   signal: ({ body }) => ({ tenantId: body.account, key: body.metadata.orderKey, name: '3ds', payload: body.result }),
 * }))
 */
export function webhook(engine: Engine, options: FastifyWebhookOptions): FastifyPluginAsync {
  const route = webhookRoute(engine, options, FASTIFY_WEBHOOK_OPTIONS);
  if (!options.url.startsWith("/")) {
    throw new InvalidOptionError("url", `webhook: url must start with '/', got ${describeValue(options.url)}`);
  }
  return async (app) => {
    // Encapsulated: the bytes stay raw in this plugin's scope only, for the signature.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
    // The same 413 problem as the other adapters; anything else goes to the app's error handling.
    app.setErrorHandler((error, _request, reply) => {
      if ((error as { code?: unknown }).code !== "FST_ERR_CTP_BODY_TOO_LARGE") throw error;
      return sendReply(reply, problemReply(new RequestBodyTooLargeError(route.maxRequestBytes)));
    });
    app.post(
      options.url,
      { bodyLimit: route.maxRequestBytes, config: { idempotency: false } },
      async (request, reply) => {
        const answer = await runWebhookRoute(route, {
          request,
          contentType: request.headers["content-type"],
          rawBody: async () => (Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0)),
        });
        return sendReply(reply, answer);
      },
    );
  };
}

/** Every method of the request's route: a route that opts in takes part whatever its method. */
function routeMethods(request: FastifyRequest): string[] {
  const method = request.routeOptions.method;
  return Array.isArray(method) ? method : [method ?? request.method];
}

function routeOf(request: FastifyRequest): RouteFacts {
  const queryAt = request.url.indexOf("?");
  const search = queryAt < 0 ? "" : request.url.slice(queryAt + 1);
  const pattern = request.routeOptions.url;
  return pattern === undefined
    ? { method: request.method, route: queryAt < 0 ? request.url : request.url.slice(0, queryAt), params: {}, search }
    : { method: request.method, route: pattern, params: { ...(request.params as object) }, search };
}

function sendReply(reply: FastifyReply, answer: HttpReply): FastifyReply {
  return reply
    .code(answer.status)
    .headers(answer.headers as Record<string, string | string[]>)
    .send(answer.body);
}

/** The handler's response as it reaches onSend: serialized text, bytes, a stream, or nothing. */
async function capturePayload(reply: FastifyReply, payload: unknown, maxBytes: number): Promise<CapturedResponse> {
  let body = Buffer.alloc(0);
  let overflowed = false;
  if (typeof payload === "string") body = Buffer.from(payload, "utf8");
  else if (payload instanceof Uint8Array) body = Buffer.from(payload);
  else if (payload instanceof ReadableStream || payload instanceof Readable) {
    const stream = payload instanceof Readable ? payload : Readable.fromWeb(payload as never);
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream) {
      const buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk as Uint8Array);
      size += buf.length;
      if (size > maxBytes) {
        overflowed = true;
        stream.destroy();
        break;
      }
      parts.push(buf);
    }
    if (!overflowed) body = Buffer.concat(parts);
  } else if (payload !== null && payload !== undefined) {
    throw new TypeError(`@idempo/http cannot store a ${typeof payload} reply payload; send a string, Buffer or stream`);
  }
  if (body.length > maxBytes) {
    overflowed = true;
    body = Buffer.alloc(0);
  }
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.map(String) : String(value);
  }
  return { status: reply.statusCode, headers, body, overflowed };
}
