/**
 * Mode (b): a route that runs a workflow through `engine.runOnce`, with its
 * phases, steps and recovery. The workflow's `{ status, body }` is the
 * answer; the body is sent as JSON, identical on the first call and on
 * every replay. A run that suspends (`.sleep`, `.waitFor`) answers 202 with
 * the workflow's `accepted` body, `Retry-After` and, with the `location`
 * option, `Location`; retries get 409 until it completes, then the replay.
 */
import { randomUUID } from "node:crypto";
import type { Engine, Workflow } from "@idempo/core";
import { IdempotencyKeyInProgressError, InputValidationError, InvalidOptionError } from "@idempo/core";
import { parseIdempotencyKey } from "../header/idempotency-key.js";
import { IdempotencyKeyMissingError } from "../problem/errors.js";
import { isIdempoError, problemReply, retryAfterSeconds } from "../problem/problem.js";
import type { HttpReply } from "../response/reply.js";
import { jsonReply, REPLAYED_HEADER } from "../response/reply.js";
import type { IdempotentOptions } from "./options.js";
import { checkIdempotentOptions, MAX_TIMER_MS, maxRequestBytes } from "./options.js";
import type { RequestHeaders } from "./trace-context.js";
import { inRequestTrace } from "./trace-context.js";

/**
 * Marks handlers made by `idempotent()` (and webhook routes), so middleware
 * mounted for a whole app or scope leaves them to themselves instead of
 * claiming their key a second time.
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
  /** The `location` option applied to this request, or undefined without the option. */
  location(run: { tenantId: string; key: string }): Promise<string | undefined>;
}

/** Settings of a workflow route, checked once when the route is built. */
export interface WorkflowRoute<Req, In, B> {
  readonly engine: Engine;
  readonly workflow: Workflow<In, B>;
  readonly options: IdempotentOptions<Req, In>;
  /** Largest request body read, in bytes. */
  readonly maxRequestBytes: number;
}

/**
 * @throws TypeError on a missing engine or workflow.
 * @throws InvalidOptionError on an unknown option, a missing input builder or tenant resolver, or a value of the wrong type or out of range.
 */
export function workflowRoute<Req, In, B>(
  engine: Engine,
  wf: Workflow<In, B>,
  options: IdempotentOptions<Req, In>,
): WorkflowRoute<Req, In, B> {
  checkIdempotentOptions(engine, options);
  if (typeof wf?.name !== "string") throw new TypeError("pass a workflow built with workflow(...).respond(...)");
  const wait = options.waitInFlightMs;
  if (wait !== undefined && (!Number.isSafeInteger(wait) || wait < 0 || wait > MAX_TIMER_MS)) {
    throw new InvalidOptionError(
      "waitInFlightMs",
      `idempotent: waitInFlightMs must be an integer from 0 to ${MAX_TIMER_MS}, got ${wait}`,
    );
  }
  return { engine, workflow: wf, options, maxRequestBytes: maxRequestBytes(options) };
}

/**
 * `Retry-After` for a run that just suspended: the time to its wake-up
 * (a sleep's end, a wait's timeout) or, when it has none, the lease
 * length, on the database clock; the same hint the 409 of a retry carries.
 * Undefined when the run already moved on (a worker finished it, or it was
 * parked or cancelled meanwhile).
 */
async function suspendedRetryAfter(engine: Engine, tenantId: string, key: string): Promise<string | undefined> {
  try {
    await engine.wait(tenantId, key, { timeoutMs: 0 });
    return undefined;
  } catch (error) {
    if (error instanceof IdempotencyKeyInProgressError) return retryAfterSeconds(error.retryAfterMs);
    if (isIdempoError(error)) return undefined;
    throw error;
  }
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
  let run: { tenantId: string; key: string } | undefined;
  try {
    let key = parseIdempotencyKey(request.keyLines);
    if (key === undefined) {
      if (route.options.required !== false) throw new IdempotencyKeyMissingError();
      key = `auto-${randomUUID()}`;
    }
    const tenantId = await request.tenant();
    run = { tenantId, key };
    await request.readBody?.(route.maxRequestBytes);
    const input = await readInput(request);
    const waitInFlightMs = route.options.waitInFlightMs;
    const result = await inRequestTrace(request.headers, () =>
      route.engine.runOnce(route.workflow, {
        tenantId,
        key,
        input,
        ...(waitInFlightMs === undefined ? {} : { waitInFlightMs }),
      }),
    );
    const headers: Record<string, string> = {};
    if (result.outcome === "suspended") {
      // Accepted, not done: where to follow it and when to look again.
      const location = await request.location(run);
      if (location !== undefined) headers.location = location;
      const retryAfter = await suspendedRetryAfter(route.engine, tenantId, key);
      if (retryAfter !== undefined) headers["retry-after"] = retryAfter;
    }
    const extra = route.options.headers?.({ status: result.status, body: result.body }) ?? {};
    for (const [name, value] of Object.entries(extra)) headers[name.toLowerCase()] = value;
    if (result.replayed) headers[REPLAYED_HEADER] = "true";
    return jsonReply(result.status, JSON.stringify(result.body), "application/json; charset=utf-8", headers);
  } catch (error) {
    if (!isIdempoError(error)) throw error;
    const reply = problemReply(error);
    if (!(error instanceof IdempotencyKeyInProgressError) || run === undefined) return reply;
    // A retry of a run still going (or suspended): point it at the run's status, as the 202 did.
    const location = await request.location(run);
    return location === undefined ? reply : { ...reply, headers: { ...reply.headers, location } };
  }
}
