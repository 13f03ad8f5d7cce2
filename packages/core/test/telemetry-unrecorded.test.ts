/**
 * Spans that record nothing. With the API installed and no SDK, the API's
 * tracer hands back a span outside any trace: the engine then does no span
 * work beyond starting it (no attributes set on it, no context made active,
 * no end), as without the API. A span an SDK sampled out is different: it
 * records nothing either but carries its trace, so it stays the parent of
 * the phase and step spans. A tracer provider that records every call stands
 * in for the SDK.
 */
import type { Context, Span, SpanContext, SpanOptions, Tracer } from "@opentelemetry/api";
import { context, INVALID_SPAN_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });

/** A span that records nothing and notes every call made on it. */
class NotingSpan implements Span {
  readonly calls: string[] = [];
  constructor(readonly ctx: SpanContext) {}
  spanContext(): SpanContext {
    return this.ctx;
  }
  isRecording(): boolean {
    return false;
  }
  #note(call: string): this {
    this.calls.push(call);
    return this;
  }
  setAttribute(): this {
    return this.#note("setAttribute");
  }
  setAttributes(): this {
    return this.#note("setAttributes");
  }
  addEvent(): this {
    return this.#note("addEvent");
  }
  addLink(): this {
    return this.#note("addLink");
  }
  addLinks(): this {
    return this.#note("addLinks");
  }
  setStatus(): this {
    return this.#note("setStatus");
  }
  updateName(): this {
    return this.#note("updateName");
  }
  recordException(): void {
    this.#note("recordException");
  }
  end(): void {
    this.#note("end");
  }
}

interface Started {
  name: string;
  span: NotingSpan;
  /** The span context active when it was started. */
  parent: SpanContext | undefined;
}

const hex = (digits: number) =>
  Array.from({ length: digits }, () => Math.floor(Math.random() * 16).toString(16)).join("");

/**
 * A tracer whose spans record nothing: outside any trace (`inTrace` false,
 * as the API's no-op tracer answers) or sampled out of one (valid ids, the
 * sampled flag clear, as an SDK's sampler answers).
 */
class NotingTracer implements Tracer {
  readonly started: Started[] = [];
  constructor(readonly inTrace: boolean) {}
  startSpan(name: string, _options?: SpanOptions, ctx: Context = context.active()): Span {
    const spanContext = this.inTrace ? { traceId: hex(32), spanId: hex(16), traceFlags: 0 } : INVALID_SPAN_CONTEXT;
    const span = new NotingSpan(spanContext);
    this.started.push({ name, span, parent: trace.getSpanContext(ctx) });
    return span;
  }
  startActiveSpan<F extends (span: Span) => unknown>(name: string, ...rest: unknown[]): ReturnType<F> {
    const fn = rest.at(-1) as (span: Span) => ReturnType<F>;
    const options = (rest.length > 1 ? rest[0] : undefined) as SpanOptions | undefined;
    const ctx = context.active();
    const span = this.startSpan(name, options, ctx);
    return context.with(trace.setSpan(ctx, span), fn, undefined, span);
  }
}

let tracer = new NotingTracer(false);

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider({ getTracer: () => tracer });
});
afterAll(() => {
  trace.disable();
  context.disable();
});

const three = workflow("three")
  .phase("reserve", () => ({ reserved: true }))
  .step("charge", () => ({ chargeId: "ch_1" }))
  .phase("confirm", () => ({}))
  .respond(() => ({ status: 201, body: { ok: true } }));

describe("spans that record nothing", () => {
  it("outside any trace: the engine starts them and does nothing else with them", async () => {
    tracer = new NotingTracer(false);
    const engine = createEngine({ db: t.db });
    const res = await engine.runOnce(three, { tenantId: "acme", key: "untraced-1", input: {} });
    expect(res).toMatchObject({ status: 201, replayed: false });
    const replay = await engine.runOnce(three, { tenantId: "acme", key: "untraced-1", input: {} });
    expect(replay.replayed).toBe(true);

    expect(tracer.started.map((s) => s.name)).toEqual([
      "runOnce three",
      "phase reserve",
      "step charge",
      "phase confirm",
      "runOnce three",
    ]);
    // No attribute set after the start, no end, and no span made active.
    for (const s of tracer.started) {
      expect(s.span.calls).toEqual([]);
      expect(s.parent).toBeUndefined();
    }
  });

  it("sampled out of a trace: they still carry it to the phase and step spans, and are ended", async () => {
    tracer = new NotingTracer(true);
    const engine = createEngine({ db: t.db });
    await engine.runOnce(three, { tenantId: "acme", key: "sampled-out-1", input: {} });

    const [run, ...items] = tracer.started as [Started, ...Started[]];
    expect(run.name).toBe("runOnce three");
    expect(items.map((s) => s.name)).toEqual(["phase reserve", "step charge", "phase confirm"]);
    for (const s of items) expect(s.parent?.spanId).toBe(run.span.ctx.spanId);
    for (const s of tracer.started) expect(s.span.calls.filter((c) => c === "end")).toHaveLength(1);
    expect(run.span.calls).toContain("setAttributes");
  });
});
