/**
 * OpenTelemetry spans and metrics, and log lines, of a checkout that
 * crashes in its charge step and is taken over by the retry: read back with
 * the SDK's in-memory exporters, registered as an application would.
 */
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import type { DataPoint, Histogram, ResourceMetrics } from "@opentelemetry/sdk-metrics";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const spans = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const meterProvider = new MeterProvider({ readers: [reader] });
const KEY = "order-key-secret-42";

// Made before any provider is registered, as an application's module-level engine is.
let early: Engine | undefined;

beforeAll(() => {
  // t.db exists from the database hook on; the engine is made before the providers below.
  early = createEngine({ db: t.db });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
});
afterAll(async () => {
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  trace.disable();
  metrics.disable();
  context.disable();
});

interface Line {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}
function recordingLogger(lines: Line[]) {
  const at = (level: string) => (fields: Record<string, unknown>, message: string) =>
    lines.push({ level, fields, message });
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

const charges: string[] = [];
const checkout = workflow("checkout", { leaseMs: 200 })
  .input(z.object({ amountCents: z.number() }))
  .phase("create_order", ({ key }) => ({ orderId: `o_${key}` }))
  .step("charge", ({ idempotencyKey }) => {
    charges.push(idempotencyKey);
    return { chargeId: `ch_${charges.length}` };
  })
  .phase("record_charge", async ({ state, outbox }) => {
    await outbox.enqueue("receipt.email", { orderId: state.orderId });
    return {};
  })
  .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));

/**
 * Until the crashed attempt's lease is seen expired twice, 300 ms apart: a
 * renewal the heartbeat had in flight when the attempt crashed in process
 * can land after the first look, on a loaded machine, and re-arm it once.
 */
async function leaseExpired(engine: Engine, tenantId: string, key: string) {
  let seen = 0;
  for (let i = 0; i < 400; i++) {
    const expired = ((await engine.inspect(tenantId, key))?.leaseRemainingMs ?? 1) <= 0;
    seen = expired ? seen + 1 : 0;
    if (seen === 2) return;
    await new Promise((r) => setTimeout(r, expired ? 300 : 25));
  }
  throw new Error("lease never expired");
}

const attr = (s: ReadableSpan, name: string) => s.attributes[name];
const children = (all: ReadableSpan[], parent: ReadableSpan) =>
  all.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId).map((s) => s.name);

function points(all: ResourceMetrics[], name: string): DataPoint<number | Histogram>[] {
  const last = all.at(-1);
  return (last?.scopeMetrics ?? [])
    .flatMap((sm) => sm.metrics)
    .filter((m) => m.descriptor.name === name)
    .flatMap((m) => m.dataPoints as DataPoint<number | Histogram>[]);
}

describe("telemetry of a crash-and-resume checkout", () => {
  const lines: Line[] = [];
  let all: ReadableSpan[] = [];
  const consoleCalls = vi.fn();

  beforeAll(async () => {
    for (const m of ["log", "info", "warn", "error", "debug"] as const)
      vi.spyOn(console, m).mockImplementation(consoleCalls);
    const engine = createEngine({ db: t.db, logger: recordingLogger(lines) });
    const tracer = trace.getTracer("shop");
    // The client's own span around both attempts: one trace per checkout.
    await tracer.startActiveSpan("POST /checkout", async (client) => {
      setFaultHook(engine, (point) => {
        if (point === "called:step:charge") throw new CrashSignal(point);
      });
      await expect(
        engine.runOnce(checkout, { tenantId: "acme", key: KEY, input: { amountCents: 500 } }),
      ).rejects.toBeInstanceOf(CrashSignal);
      setFaultHook(engine, undefined);
      await leaseExpired(engine, "acme", KEY);
      const resumed = await engine.runOnce(checkout, { tenantId: "acme", key: KEY, input: { amountCents: 500 } });
      expect(resumed).toMatchObject({ status: 201, replayed: false });
      const replay = await engine.runOnce(checkout, { tenantId: "acme", key: KEY, input: { amountCents: 500 } });
      expect(replay.replayed).toBe(true);
      client.end();
    });
    const relay = engine.startRelay({ handlers: { "receipt.email": () => undefined }, pollIntervalMs: 50 });
    for (let i = 0; i < 400; i++) {
      const { rows } = await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM idempo.outbox WHERE status = 'delivered'`.execute(t.db);
      if (rows[0]?.n === 1) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await relay.stop();
    all = spans.getFinishedSpans();
  });

  it("records one trace: the crashed attempt, the takeover that links to it, the resumed steps, the replay", () => {
    const client = all.find((s) => s.name === "POST /checkout") as ReadableSpan;
    const runs = all.filter((s) => s.name === "runOnce checkout");
    expect(runs).toHaveLength(3);
    for (const r of runs) {
      expect(r.spanContext().traceId).toBe(client.spanContext().traceId);
      expect(r.parentSpanContext?.spanId).toBe(client.spanContext().spanId);
    }
    const [crashed, takeover, replay] = runs as [ReadableSpan, ReadableSpan, ReadableSpan];
    expect(crashed.attributes).toMatchObject({
      "idempo.claim.result": "new",
      "idempo.attempt": 1,
      "idempo.workflow": "checkout",
      "idempo.tenant_id": "acme",
    });
    expect(crashed.status.code).toBe(2); // ERROR
    expect(children(all, crashed)).toEqual(["phase create_order", "step charge"]);

    expect(takeover.attributes).toMatchObject({
      "idempo.claim.result": "takeover",
      "idempo.attempt": 2,
      "idempo.outcome": "succeeded",
      "idempo.replayed": false,
    });
    expect(takeover.links.map((l) => l.context.spanId)).toEqual([crashed.spanContext().spanId]);
    expect(children(all, takeover)).toEqual(["step charge", "phase record_charge"]);
    const resumedCharge = all.find(
      (s) => s.name === "step charge" && s.parentSpanContext?.spanId === takeover.spanContext().spanId,
    ) as ReadableSpan;
    expect(resumedCharge.attributes).toMatchObject({
      "idempo.step.in_doubt": true,
      "idempo.step.reconciled": false,
      "idempo.attempt": 2,
    });
    const firstCharge = all.find(
      (s) => s.name === "step charge" && s.parentSpanContext?.spanId === crashed.spanContext().spanId,
    ) as ReadableSpan;
    expect(attr(firstCharge, "idempo.step.derived_key.hash")).toBe(attr(resumedCharge, "idempo.step.derived_key.hash"));

    expect(replay.attributes).toMatchObject({ "idempo.claim.result": "replay", "idempo.replayed": true });
    expect(children(all, replay)).toEqual([]);
  });

  it("never puts the raw key or a derived key in a span", () => {
    const text = JSON.stringify(all.map((s) => [s.name, s.attributes]));
    expect(text).not.toContain(KEY);
    for (const k of charges) expect(text).not.toContain(k);
    expect(text).toContain("idempo.key.hash");
  });

  it("records a delivery span per outbox message", () => {
    const deliveries = all.filter((s) => s.name === "deliver receipt.email");
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]?.attributes).toMatchObject({
      "messaging.destination.name": "receipt.email",
      "idempo.outbox.attempt": 1,
    });
  });

  it("counts claims by result and records durations in seconds", async () => {
    await reader.forceFlush();
    const exported = metricExporter.getMetrics();
    const claims = points(exported, "idempo.claims").map((p) => [p.attributes["idempo.claim.result"], p.value]);
    expect(Object.fromEntries(claims)).toEqual({ new: 1, takeover: 1, replay: 1 });
    const runs = points(exported, "idempo.run.duration");
    expect(runs.map((p) => (p.value as Histogram).count)).toEqual([3]);
    const phases = points(exported, "idempo.phase.duration").map((p) => [
      p.attributes["idempo.item"],
      (p.value as Histogram).count,
    ]);
    expect(Object.fromEntries(phases)).toEqual({ create_order: 1, charge: 2, record_charge: 1 });
    expect(points(exported, "idempo.outbox.lag").map((p) => (p.value as Histogram).count)).toEqual([1]);
    const descriptor = exported
      .at(-1)
      ?.scopeMetrics.flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === "idempo.run.duration");
    expect(descriptor?.descriptor.unit).toBe("s");
  });

  it("logs the takeover once through the given logger, and never writes to the console", () => {
    const takeovers = lines.filter((l) => l.message.includes("took over"));
    expect(takeovers).toHaveLength(1);
    expect(takeovers[0]).toMatchObject({
      level: "info",
      fields: { workflow: "checkout", tenantId: "acme", attempt: 2, recoveryPoint: "create_order" },
    });
    expect(JSON.stringify(lines)).not.toContain(KEY);
    expect(consoleCalls).not.toHaveBeenCalled();
  });
});

describe("an engine made before the SDK was registered", () => {
  it("still records its spans", async () => {
    const tiny = workflow("tiny")
      .phase("only", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await (early as Engine).runOnce(tiny, { tenantId: "acme", key: "early-1", input: {} });
    const names = spans.getFinishedSpans().map((s) => s.name);
    expect(names).toContain("runOnce tiny");
    expect(names).toContain("phase only");
  });
});
