/**
 * Continue the caller's trace: a request that carries trace context
 * (W3C `traceparent` and `tracestate`, or whatever propagator the
 * application registered) runs its `engine.runOnce` inside the context
 * extracted from its headers, so idempo's `runOnce` span becomes a child of
 * the caller's remote span instead of the root of a trace of its own.
 *
 * Only when no span is active already: an instrumented server has made its
 * own server span from the same headers, and idempo's span belongs under
 * that one. `@opentelemetry/api` is an optional peer dependency; without it
 * (or without a registered propagator and context manager) the call runs
 * as it is. No OpenTelemetry type appears in an exported signature, so the
 * declarations type-check for applications that do not install it.
 */
import { createRequire } from "node:module";
import type * as Api from "@opentelemetry/api";

/** A request's headers as a propagator reads them; `get` takes a lower-case name. */
export interface RequestHeaders {
  get(name: string): string | string[] | undefined;
  keys(): string[];
}

/** The headers of a Node request (`IncomingMessage.headers`: lower-case names). */
export function nodeRequestHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): RequestHeaders {
  return { get: (name) => headers[name], keys: () => Object.keys(headers) };
}

// undefined: not looked for yet; null: not installed.
let otel: typeof Api | null | undefined;

function loadOtel(): typeof Api | null {
  if (otel === undefined) {
    try {
      otel = createRequire(import.meta.url)("@opentelemetry/api") as typeof Api;
    } catch {
      otel = null;
    }
  }
  return otel;
}

const getter: Api.TextMapGetter<RequestHeaders> = {
  get: (carrier, key) => carrier.get(key.toLowerCase()),
  keys: (carrier) => carrier.keys(),
};

/**
 * Run `fn` in the trace context the request's headers carry, when they
 * carry a valid one and no span is active; otherwise run it as it is.
 */
export function inRequestTrace<T>(headers: RequestHeaders, fn: () => Promise<T>): Promise<T> {
  const api = loadOtel();
  if (!api) return fn();
  const active = api.context.active();
  if (api.trace.getSpan(active) !== undefined) return fn();
  const extracted = api.propagation.extract(active, headers, getter);
  const remote = api.trace.getSpanContext(extracted);
  if (remote === undefined || !api.trace.isSpanContextValid(remote)) return fn();
  return api.context.with(extracted, fn);
}
