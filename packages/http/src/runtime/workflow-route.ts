/**
 * Mode (b): a route that runs a workflow through `engine.runOnce`, with its
 * phases, steps and recovery. The workflow's `{ status, body }` is the
 * answer; the body is sent as JSON, identical on the first call and on
 * every replay.
 */
import { randomUUID } from "node:crypto";
import type { Engine, Workflow } from "@idempo/core";
import { InputValidationError } from "@idempo/core";
import { parseIdempotencyKey } from "../header/idempotency-key.js";
import { IdempotencyKeyMissingError } from "../problem/errors.js";
import { isIdempoError, problemReply } from "../problem/problem.js";
import type { HttpReply } from "../response/reply.js";
import { jsonReply, REPLAYED_HEADER } from "../response/reply.js";
import type { IdempotentOptions } from "./options.js";
import { checkCommon, maxRequestBytes } from "./options.js";
import type { RequestHeaders } from "./trace-context.js";
import { inRequestTrace } from "./trace-context.js";

/**
 * Marks handlers made by `idempotent()`, so middleware mounted for a whole
 * app or scope leaves workflow routes to the workflow instead of claiming
 * their key a second time.
 */
const WORKFLOW_ROUTE: unique symbol = Symbol.for("@idempo/http.workflow-route");

/** Mark a framework handler as a workflow route with its request limit. */
export function markWorkflowRoute<H extends object>(handler: H, route: { maxRequestBytes: number }): H {
  Object.defineProperty(handler, WORKFLOW_ROUTE, { value: { maxRequestBytes: route.maxRequestBytes } });
  return handler;
}

/** The request limit of a handler made by `idempotent()`, or undefined for any other handler. */
export function workflowRouteLimit(handler: unknown): number | undefined {
  if (typeof handler !== "function") return undefined;
  const mark = (handler as unknown as Record<symbol, { maxRequestBytes: number } | undefined>)[WORKFLOW_ROUTE];
  return mark?.maxRequestBytes;
}

/** True for handlers made by `idempotent()`. */
export function isWorkflowRoute(handler: unknown): boolean {
  return workflowRouteLimit(handler) !== undefined;
}

/** A request as a workflow route needs it; the adapter fills it in. */
export interface WorkflowRequest<In> {
  readonly keyLines: readonly string[];
  /** All headers, for the trace context the request may carry. */
  readonly headers: RequestHeaders;
  tenant(): Promise<string>;
  /**
   * Read the body, refusing it past `maxBytes` (413), before `input` sees
   * it; for frameworks that have not read it yet (Express without a
   * parser, Hono). Fastify's `bodyLimit` has done this already.
   */
  readBody?(maxBytes: number): Promise<void>;
  input(): Promise<In>;
}

/** Settings of a workflow route, checked once when the route is built. */
export interface WorkflowRoute<Req, In, B> {
  readonly engine: Engine;
  readonly workflow: Workflow<In, B>;
  readonly options: IdempotentOptions<Req, In>;
  /** Largest request body read, in bytes. */
  readonly maxRequestBytes: number;
}

/** @throws TypeError on a missing workflow, input builder or tenant resolver. */
export function workflowRoute<Req, In, B>(
  engine: Engine,
  wf: Workflow<In, B>,
  options: IdempotentOptions<Req, In>,
): WorkflowRoute<Req, In, B> {
  checkCommon(engine, options);
  if (typeof wf?.name !== "string") throw new TypeError("pass a workflow built with workflow(...).respond(...)");
  if (typeof options.input !== "function") {
    throw new TypeError("options.input is required: a function that builds the workflow's input from the request");
  }
  return { engine, workflow: wf, options, maxRequestBytes: maxRequestBytes(options) };
}

/**
 * Build the workflow's input; a builder that throws (typically `JSON.parse`
 * on a malformed body) means the request was bad: 400, not 500.
 */
async function readInput<In>(request: WorkflowRequest<In>): Promise<In> {
  try {
    return await request.input();
  } catch (error) {
    if (isIdempoError(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new InputValidationError([{ path: "$", message: `the request could not be read as input: ${message}` }], {
      cause: error,
    });
  }
}

/** Run the workflow for one request and turn the outcome (or an idempo error) into a reply. */
export async function runWorkflowRoute<Req, In, B>(
  route: WorkflowRoute<Req, In, B>,
  request: WorkflowRequest<In>,
): Promise<HttpReply> {
  try {
    let key = parseIdempotencyKey(request.keyLines);
    if (key === undefined) {
      if (route.options.required !== false) throw new IdempotencyKeyMissingError();
      key = `auto-${randomUUID()}`;
    }
    const tenantId = await request.tenant();
    await request.readBody?.(route.maxRequestBytes);
    const input = await readInput(request);
    const result = await inRequestTrace(request.headers, () =>
      route.engine.runOnce(route.workflow, { tenantId, key, input }),
    );
    const headers: Record<string, string> = {};
    const extra = route.options.headers?.({ status: result.status, body: result.body }) ?? {};
    for (const [name, value] of Object.entries(extra)) headers[name.toLowerCase()] = value;
    if (result.replayed) headers[REPLAYED_HEADER] = "true";
    return jsonReply(result.status, JSON.stringify(result.body), "application/json; charset=utf-8", headers);
  } catch (error) {
    if (isIdempoError(error)) return problemReply(error);
    throw error;
  }
}
