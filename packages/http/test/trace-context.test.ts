/**
 * The adapters continue the caller's trace: a request with a W3C
 * `traceparent` gets idempo's `runOnce` span as a child of the caller's
 * remote span, in both modes and on every adapter; without one it is the
 * root of its own trace; under a span an instrumented server already made,
 * that span stays the parent. Read back with the SDK's in-memory exporter.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import express from "express";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { idempotency } from "../src/adapters/express.ts";
import { expressHarness } from "./support/apps/express-app.ts";
import { fastifyHarness } from "./support/apps/fastify-app.ts";
import { honoHarness } from "./support/apps/hono-app.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";
import { Effects } from "./support/effects.ts";
import type { RunningApp } from "./support/routes.ts";

const spans = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });

// Registered before the engine is made, as an application starts its SDK first (docs/observability.md).
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
});
const t = useTestDatabase();
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
});
beforeEach(() => spans.reset());

/** A caller's span, as the client would send it. */
function callerSpan() {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01`, tracestate: "shop=checkout" };
}

/** The one `runOnce` span the request produced. */
function runOnceSpan(): ReadableSpan {
  const runs = spans.getFinishedSpans().filter((s) => s.name.startsWith("runOnce "));
  expect(runs.map((s) => s.name)).toHaveLength(1);
  return runs[0] as ReadableSpan;
}

const uid = () => randomUUID().slice(0, 13);
const routes = [
  { mode: "a wrapped handler", path: "/wrapped/orders", span: "runOnce http POST /wrapped/orders" },
  { mode: "a workflow route", path: "/refunds", span: "runOnce refund" },
] as const;

for (const harness of [expressHarness, fastifyHarness, honoHarness]) {
  describe(`${harness.name}: the incoming trace context`, () => {
    let app: RunningApp;
    beforeAll(async () => {
      app = await harness.start({ engine: t.engine, db: t.db, effects: new Effects() });
    });
    afterAll(async () => {
      await app?.close();
    });

    const post = (path: string, extra: [string, string][]) =>
      send(app.url, {
        path,
        headers: [["Authorization", "Bearer t1-a"], ["Idempotency-Key", `k-${uid()}`], ...extra],
        json: { cartId: `c-${uid()}`, amountCents: 100, tag: uid() },
      });

    for (const route of routes) {
      it(`${route.mode}: runOnce is a child of the caller's remote span`, async () => {
        const caller = callerSpan();
        const res = await post(route.path, [
          ["traceparent", caller.traceparent],
          ["tracestate", caller.tracestate],
        ]);
        expect(res.status).toBe(201);
        const span = runOnceSpan();
        expect(span.name).toBe(route.span);
        expect(span.spanContext().traceId).toBe(caller.traceId);
        expect(span.parentSpanContext).toMatchObject({
          traceId: caller.traceId,
          spanId: caller.spanId,
          isRemote: true,
        });
        expect(span.spanContext().traceState?.serialize()).toBe(caller.tracestate);
        // The phases and steps follow in the same trace.
        for (const s of spans.getFinishedSpans()) expect(s.spanContext().traceId).toBe(caller.traceId);
      });

      it(`${route.mode}: without a traceparent, runOnce is the root of its own trace`, async () => {
        expect((await post(route.path, [])).status).toBe(201);
        const span = runOnceSpan();
        expect(span.name).toBe(route.span);
        expect(span.parentSpanContext).toBeUndefined();
      });
    }

    it("a malformed traceparent is ignored: runOnce is a root span", async () => {
      expect((await post("/refunds", [["traceparent", "00-not-a-trace-01"]])).status).toBe(201);
      expect(runOnceSpan().parentSpanContext).toBeUndefined();
    });
  });
}

describe("under a span an instrumented server already made", () => {
  it("leaves that span the parent, whatever the traceparent says", async () => {
    const tracer = trace.getTracer("server");
    const app = express();
    const serverSpans: string[] = [];
    // What an instrumented server does: a server span, active while the request is handled.
    app.use((_req, res, next) => {
      tracer.startActiveSpan("POST /orders", (span) => {
        serverSpans.push(span.spanContext().spanId);
        res.on("finish", () => span.end());
        next();
      });
    });
    app.post("/orders", express.json(), idempotency(t.engine, { tenant: () => "t1" }), (_req, res) => {
      res.status(201).json({ ok: true });
    });
    const server = app.listen(0, "127.0.0.1");
    await new Promise((resolve) => server.once("listening", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const caller = callerSpan();
      const res = await send(url, {
        path: "/orders",
        headers: [
          ["Idempotency-Key", `k-${uid()}`],
          ["traceparent", caller.traceparent],
        ],
        json: { a: 1 },
      });
      expect(res.status).toBe(201);
      const span = runOnceSpan();
      expect(serverSpans).toHaveLength(1);
      expect(span.parentSpanContext?.spanId).toBe(serverSpans[0]);
      expect(span.spanContext().traceId).not.toBe(caller.traceId);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
