/**
 * Mode (a): run an existing route handler once per key. Each request builds
 * a one-step workflow whose step lets the handler run and waits for the
 * response the adapter captured; `respond` stores that response (status,
 * allow-listed headers, body bytes) as the run's JSON body.
 *
 * The handler runs in a step, not a phase: its own database writes are not
 * in the key's transaction either way, and a step holds no transaction
 * (and no connection) open while the handler works, which PGlite's single
 * connection needs. A crash after the handler's effect and before the
 * response is stored leaves the key in flight; once its lease expires, a
 * retry runs the handler again. Route to a workflow (mode b) when that
 * must not happen.
 */
import type { Engine, JsonObject, JsonValue, RunResult } from "@idempo/core";
import { workflow } from "@idempo/core";
import { parseIdempotencyKey } from "../header/idempotency-key.js";
import { IdempotencyKeyMissingError } from "../problem/errors.js";
import { isIdempoError, problemDocument, problemReply } from "../problem/problem.js";
import type { BodyFacts } from "../request/body.js";
import type { RouteFacts } from "../request/route.js";
import { wrappedInput, wrappedWorkflowName } from "../request/route.js";
import { replayForEncoding } from "../response/content-coding.js";
import type { CapturedResponse } from "../response/envelope.js";
import { loadResponse, storeResponse } from "../response/envelope.js";
import type { HttpReply } from "../response/reply.js";
import { REPLAYED_HEADER } from "../response/reply.js";
import { deferred } from "./deferred.js";
import type { WrapSettings } from "./options.js";
import type { RequestHeaders } from "./trace-context.js";
import { inRequestTrace } from "./trace-context.js";

/** What a wrapped handler may know about the run it executes in. */
export interface HandlerRun {
  /** The client's idempotency key. */
  readonly key: string;
  /** The tenant the key belongs to. */
  readonly tenantId: string;
  /** A key derived from tenant, key and route, identical on every attempt: pass it to the next service. */
  readonly derivedKey: string;
  /** 1 for the first execution, more when a retry took over a crashed one. */
  readonly attempt: number;
}

/** A request, as much of it as the middleware needs; the adapter fills it in. */
export interface WrappedRequest {
  readonly method: string;
  /** Every `Idempotency-Key` header line. */
  readonly keyLines: readonly string[];
  /** All headers, for the trace context the request may carry. */
  readonly headers: RequestHeaders;
  tenant(): Promise<string>;
  route(): RouteFacts;
  /** Read (or take the parsed) body; may throw 413 or 400 errors. */
  body(): Promise<BodyFacts>;
}

/** What the adapter does next. */
export type WrappedStart =
  | { readonly kind: "pass" }
  | { readonly kind: "reply"; readonly reply: HttpReply }
  | {
      readonly kind: "execute";
      readonly run: HandlerRun;
      /**
       * Store the handler's response; resolves with what to send instead of
       * it. With `answered: false` the response is not the handler's answer
       * (no route took the request, or an error escaped into the
       * framework's error handling): nothing is stored, the claim is
       * released, and the response goes out as it is.
       */
      finish(captured: CapturedResponse, answered?: boolean): Promise<Finished>;
      /** The handler failed without any response: nothing is stored and the claim is released. */
      abandon(): Promise<void>;
    };

/**
 * What to send once the handler's response is stored: its own status and
 * headers with the stored body bytes (`stored`, the same bytes every replay
 * gets), or a problem that replaces it (`problem`: the body was too large,
 * or the attempt lost its lease or its database).
 */
export type Finished =
  | { readonly kind: "stored"; readonly body: Buffer }
  | { readonly kind: "problem"; readonly reply: HttpReply };

/** Stands in for the response a handler never produced (its error went past the middleware). */
const NO_RESPONSE: CapturedResponse = Object.freeze({
  status: 500,
  headers: {},
  body: Buffer.alloc(0),
  overflowed: false,
});

/** This attempt's own stored answer as it is; a replay in a content coding the request accepts. */
async function replayOf(result: RunResult<unknown>, headers: RequestHeaders): Promise<HttpReply> {
  const reply = loadResponse(result.body as JsonValue);
  if (!result.replayed) return reply;
  const fitted = await replayForEncoding(reply, acceptEncodingOf(headers));
  return { ...fitted, headers: { ...fitted.headers, [REPLAYED_HEADER]: "true" } };
}

function acceptEncodingOf(headers: RequestHeaders): string | undefined {
  const value = headers.get("accept-encoding");
  return Array.isArray(value) ? value.join(", ") : value;
}

/** Stored instead when a resumed run finds no captured response (cannot happen unless respond was retried alone). */
function lostResponse(): { status: number; body: JsonObject } {
  const doc = problemDocument("response_lost", 500, undefined);
  return {
    status: 500,
    body: {
      format: "idempo.http/1",
      status: 500,
      headers: [["content-type", "application/problem+json"]],
      body: { utf8: JSON.stringify(doc) },
    },
  };
}

/**
 * Decide what to do with a request on a wrapped route: pass it through,
 * answer it (a problem, a replay), or let the handler run and then store
 * its response with `finish`. Errors that are not idempo's propagate.
 */
export async function startWrapped(
  engine: Engine,
  settings: WrapSettings,
  request: WrappedRequest,
): Promise<WrappedStart> {
  if (!settings.methods.has(request.method.toUpperCase())) return { kind: "pass" };
  try {
    const key = parseIdempotencyKey(request.keyLines);
    if (key === undefined) {
      if (settings.required) throw new IdempotencyKeyMissingError();
      return { kind: "pass" };
    }
    const tenantId = await request.tenant();
    const route = request.route();
    const input = wrappedInput(route, await request.body());
    return await claim(engine, settings, { tenantId, key, route, input, headers: request.headers });
  } catch (error) {
    if (isIdempoError(error)) return { kind: "reply", reply: problemReply(error) };
    throw error;
  }
}

async function claim(
  engine: Engine,
  settings: WrapSettings,
  req: { tenantId: string; key: string; route: RouteFacts; input: Record<string, unknown>; headers: RequestHeaders },
): Promise<WrappedStart> {
  const started = deferred<HandlerRun>();
  const handed = deferred<{ captured: CapturedResponse; answered: boolean }>();
  let stored: JsonObject | undefined;

  const wf = workflow(wrappedWorkflowName(req.route), settings.workflowOptions)
    .step("handler", async (ctx) => {
      started.resolve({ key: ctx.key, tenantId: ctx.tenantId, derivedKey: ctx.idempotencyKey, attempt: ctx.attempt });
      const { captured, answered } = await handed.promise;
      stored = storeResponse(captured, settings.replayHeaders);
      // A framework's 404 or error page is no answer of the handler's: keeping it would replay a
      // stack trace, or a 404 for a route added later, to every retry.
      if (!answered || (!captured.overflowed && !settings.storeResponse(captured.status))) {
        // Before anything committed: deletes the claim, stores nothing.
        ctx.reject(captured.status, stored);
      }
    })
    .respond(() => (stored ? { status: stored.status as number, body: stored } : lostResponse()));

  const running = inRequestTrace(req.headers, () =>
    engine.runOnce(wf, { tenantId: req.tenantId, key: req.key, input: req.input as JsonValue }),
  );
  const first = await Promise.race([
    started.promise.then((run) => ({ run }) as const),
    running.then(
      (result) => ({ result }) as const,
      (error: unknown) => ({ error }) as const,
    ),
  ]);
  if ("error" in first) throw first.error;
  if ("result" in first) return { kind: "reply", reply: await replayOf(first.result, req.headers) };

  return {
    kind: "execute",
    run: first.run,
    async finish(captured, answered = true) {
      handed.resolve({ captured, answered });
      let reply: HttpReply;
      try {
        const result = await running;
        if (!answered && !captured.overflowed) return { kind: "stored", body: captured.body };
        reply = await replayOf(result, req.headers);
      } catch (error) {
        if (isIdempoError(error)) return { kind: "problem", reply: problemReply(error) };
        throw error;
      }
      if (captured.overflowed || reply.status !== captured.status) return { kind: "problem", reply };
      // The first caller gets every header the handler set (cookies too) with the stored bytes.
      return { kind: "stored", body: reply.body };
    },
    async abandon() {
      handed.resolve({ captured: NO_RESPONSE, answered: false });
      await running.catch(() => undefined);
    },
  };
}
