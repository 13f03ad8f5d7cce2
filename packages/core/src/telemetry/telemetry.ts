/**
 * What an engine reports about its work: spans (one per `runOnce`, a child
 * per phase and step, one per outbox delivery), metrics, and log lines, all
 * named in the OpenTelemetry semantic-convention style (dotted lower-case
 * names under `idempo.`, durations in seconds). The idempotency key never
 * appears raw: only as `idempo.key.hash`.
 */
import { hash } from "node:crypto";
import { createRequire } from "node:module";
import type * as Api from "@opentelemetry/api";
import type { LogFields, Logger } from "./logger.js";
import { log } from "./logger.js";

const { version } = createRequire(import.meta.url)("../../package.json") as { version: string };

/**
 * The API module, or null when the application did not install it: it is an
 * optional peer dependency. Kept out of every exported signature, so the
 * declarations type-check for applications without it.
 */
function loadOtel(): typeof Api | null {
  try {
    return createRequire(import.meta.url)("@opentelemetry/api") as typeof Api;
  } catch {
    return null;
  }
}

/** Attribute values as OpenTelemetry takes them. */
export type Attributes = Record<string, string | number | boolean>;

/** How a claim ended, the `idempo.claim.result` attribute and metric label. */
export type ClaimResult = "new" | "replay" | "in_progress" | "mismatch" | "takeover" | "resume" | "parked" | "expired";

/** The first 16 hex digits of SHA-256 over tenant and key: correlates spans without exposing the key. */
export function keyHash(tenantId: string, key: string): string {
  return hash("sha256", `${tenantId}\u0000${key}`, "hex").slice(0, 16);
}

/** A span in progress, or nothing when tracing is off. */
export interface SpanScope {
  /**
   * True while the span records what it is given: attributes that cost work
   * to compute (a hash) are worth computing only then.
   */
  readonly recording: boolean;
  set(attributes: Attributes): void;
  /** Link this span to an earlier one (the attempt a takeover replaced), by W3C traceparent. */
  link(traceparent: string): void;
  /** This span's W3C traceparent when it is sampled, else null. */
  traceparent(): string | null;
}

const NO_SPAN: SpanScope = {
  recording: false,
  set: () => undefined,
  link: () => undefined,
  traceparent: () => null,
};

/** The engine's counters. */
type CounterName = "claims" | "leaseLost" | "parked" | "stepRetries" | "deadLetters" | "sweepDeleted";
/** The engine's histograms (seconds). */
type HistogramName = "outboxLag" | "runDuration" | "phaseDuration";

/** What the engine needs of a counter and a histogram. */
interface Counter {
  add(value: number, attributes?: Attributes): void;
}
interface Histogram {
  record(value: number, attributes?: Attributes): void;
}
type Instruments = Record<CounterName, Counter> & Record<HistogramName, Histogram>;

/** The engine's instruments, or null when no meter provider is registered (the API's no-op meter's would record nothing). */
function createInstruments(api: typeof Api): Instruments | null {
  const meter = api.metrics.getMeter("idempo", version);
  if (meter === api.createNoopMeter()) return null;
  const seconds = (name: string, description: string) => meter.createHistogram(name, { description, unit: "s" });
  return {
    claims: meter.createCounter("idempo.claims", { description: "runOnce calls by claim result", unit: "{claim}" }),
    leaseLost: meter.createCounter("idempo.lease.lost", {
      description: "attempts that lost their lease",
      unit: "{attempt}",
    }),
    parked: meter.createCounter("idempo.runs.parked", { description: "runs parked", unit: "{run}" }),
    stepRetries: meter.createCounter("idempo.step.retries", {
      description: "in-process step retries",
      unit: "{retry}",
    }),
    deadLetters: meter.createCounter("idempo.outbox.dead_letters", {
      description: "outbox messages moved to the dead letters",
      unit: "{message}",
    }),
    sweepDeleted: meter.createCounter("idempo.sweep.deleted", {
      description: "records deleted by sweeps",
      unit: "{record}",
    }),
    outboxLag: seconds("idempo.outbox.lag", "time from a message's commit to its delivery"),
    runDuration: seconds("idempo.run.duration", "duration of runOnce calls"),
    phaseDuration: seconds("idempo.phase.duration", "duration of phases and steps"),
  };
}

/** Telemetry of one engine. */
export class Telemetry {
  readonly #api: typeof Api | null;
  readonly #logger: Logger;
  // Metric instruments are made at first use: the application registers its meter provider at start-up.
  #instruments: Instruments | null | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
    this.#api = loadOtel();
  }

  #metrics(): Instruments | null {
    if (this.#instruments === undefined) this.#instruments = this.#api ? createInstruments(this.#api) : null;
    return this.#instruments;
  }

  /** True when metrics are recorded: only then is a duration worth measuring. */
  get metered(): boolean {
    return this.#metrics() !== null;
  }

  /** Write a log line through the application's logger. */
  log(level: keyof Logger, fields: LogFields, message: string): void {
    log(this.#logger, level, fields, message);
  }

  /** Add 1 (or `n`) to a counter. */
  count(
    name: Exclude<keyof Instruments, "outboxLag" | "runDuration" | "phaseDuration">,
    attributes: Attributes = {},
    n = 1,
  ): void {
    if (n > 0) this.#metrics()?.[name].add(n, attributes);
  }

  /** Record a duration in ms on a histogram (stored in seconds). */
  duration(name: HistogramName, ms: number, attributes: Attributes = {}): void {
    this.#metrics()?.[name].record(Math.max(0, ms) / 1000, attributes);
  }

  /**
   * Run `fn` inside a span named `name` (a child of the active span), ended
   * when `fn` settles; a thrown error marks it failed with `error.type`.
   * `attributes` is what the span starts with; a function is called only
   * when a tracer provider is registered (the samplers see them at the start).
   * When none is registered, the API's no-op tracer would hand back a span
   * that records nothing and belongs to no trace, unless a span is active:
   * then no span is started at all and `fn` runs as it does without the API
   * (no active context, no scope closures), so an application that installs
   * the API but no SDK pays only for that check.
   */
  span<T>(
    name: string,
    kind: "internal" | "server" | "producer",
    attributes: Attributes | (() => Attributes),
    fn: (scope: SpanScope) => Promise<T>,
  ): Promise<T> {
    const api = this.#api;
    if (!api) return fn(NO_SPAN);
    // Looked up per span, not once: the application may register its provider
    // after the engine was made, and through the API's other module build
    // (ESM beside this CommonJS require), whose proxy this one never sees.
    const tracer = api.trace.getTracer("idempo", version);
    // The API hands out its proxy tracer only while no provider is registered;
    // its spans are the no-op tracer's: of the active span's trace, else of none.
    if (tracer instanceof api.ProxyTracer && !inTrace(api, api.trace.getSpanContext(api.context.active()))) {
      return fn(NO_SPAN);
    }
    const span = tracer.startSpan(name, {
      kind: spanKind(api, kind),
      attributes: typeof attributes === "function" ? attributes() : attributes,
    });
    // A span an SDK sampled out still carries its trace (valid ids), which the
    // children must inherit: only a span of no trace (the no-op tracer's) is
    // skipped. Its all-zero trace id is compared, not matched by a pattern.
    if (!span.isRecording() && span.spanContext().traceId === api.INVALID_TRACEID) return fn(NO_SPAN);
    // What the tracer's startActiveSpan does, spelt out so the check above comes first.
    return api.context.with(api.trace.setSpan(api.context.active(), span), () => inSpan(api, span, fn));
  }
}

/** True for the context of a span in a trace, which a no-op tracer's span would inherit. */
function inTrace(api: typeof Api, context: Api.SpanContext | undefined): boolean {
  return context !== undefined && api.isSpanContextValid(context);
}

function spanKind(api: typeof Api, kind: "internal" | "server" | "producer"): Api.SpanKind {
  if (kind === "server") return api.SpanKind.SERVER;
  return kind === "producer" ? api.SpanKind.PRODUCER : api.SpanKind.INTERNAL;
}

/** Run `fn` with a scope over `span`, then end it; a thrown error marks it failed. */
async function inSpan<T>(api: typeof Api, span: Api.Span, fn: (scope: SpanScope) => Promise<T>): Promise<T> {
  const scope: SpanScope = {
    get recording() {
      return span.isRecording();
    },
    set: (a) => void span.setAttributes(a),
    link(traceparent) {
      const context = parseTraceparent(traceparent);
      if (context) span.addLink({ context });
    },
    traceparent() {
      const c = span.spanContext();
      return (c.traceFlags & api.TraceFlags.SAMPLED) === 0 ? null : `00-${c.traceId}-${c.spanId}-01`;
    },
  };
  try {
    return await fn(scope);
  } catch (error) {
    span.setAttribute("error.type", errorType(error));
    span.setStatus({
      code: api.SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    span.end();
  }
}

/** The `error.type` of a thrown value: an idempo error's code, else the class name. */
function errorType(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : "unknown";
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C traceparent as a span context to link to; null when it does not parse. */
function parseTraceparent(text: string): Api.SpanContext | null {
  const m = TRACEPARENT.exec(text);
  if (!m) return null;
  return { traceId: m[1] as string, spanId: m[2] as string, traceFlags: Number.parseInt(m[3] as string, 16) };
}
