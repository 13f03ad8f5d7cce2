/**
 * What OpenTelemetry costs on the hot path. Three engines on the same pool,
 * new-key and replay `runOnce` at 16 clients:
 *
 * - **no API**: made while `@opentelemetry/api` cannot be found, as in an
 *   application that does not install it (the engine loads nothing);
 * - **API, no SDK**: the API installed and nothing registered, so its own
 *   no-op tracer and meter answer (the claim: the same cost as no API);
 * - **SDK**: a tracer provider (batch span processor) and a meter provider
 *   registered, with exporters that drop everything, and the
 *   AsyncLocalStorage context manager: the reference for what recording costs.
 *
 * The API's no-op is measured first, with nothing ever registered: a
 * registration hands its provider to every proxy tracer made before it, so
 * after it the no-op engine would no longer be one. The SDK is then
 * registered for the rest of the run, so this part runs last. Each round
 * measures both sides of a comparison back to back, alternating which goes
 * first; the ratio is taken per round and the median reported.
 *
 * The no-op is also compared on the client's CPU time alone, in many short
 * rounds bounded by a count of operations rather than by time: on a shared
 * machine the wall clock (and so ops/s) moves with other work, while the CPU
 * time the client spends per operation moves much less.
 */
import Module from "node:module";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ExportResultCode } from "@opentelemetry/core";
import type { PushMetricExporter } from "@opentelemetry/sdk-metrics";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Kysely, PostgresDialect } from "kysely";
import { replayKey } from "./cells.js";
import type { Operation, RoundResult } from "./measure.js";
import { cpuPerOp, median, runLoad } from "./measure.js";
import type { Ratio } from "./report.js";
import { fmt, table } from "./report.js";
import type { PgBench } from "./setup.js";
import { INPUT, newKey, orderOnce, TENANT } from "./workload.js";

const CLIENTS = 16;
/** Operations per side and round of the count-bounded CPU comparison. */
const CPU_OPS = 1000;

/** One side ÷ the engine without the API: throughput, and the client's CPU time per operation. */
interface OtelRatios {
  readonly opsPerSec: Ratio;
  readonly cpuPerOp: Ratio;
}

export interface OtelComparison {
  readonly path: "new-key" | "replay";
  /** The API's no-op ÷ no API. */
  readonly noop: OtelRatios;
  /** The API's no-op ÷ no API: client CPU per operation, in count-bounded rounds. */
  readonly noopCpu: Ratio;
  readonly cpuRounds: number;
  /** The SDK ÷ no API. */
  readonly sdk: OtelRatios;
}

/** An engine on the bench's 16-connection pool; `hideApi` makes it as if `@opentelemetry/api` were not installed. */
function engineOn(bench: PgBench, hideApi: boolean): { engine: Engine; db: Kysely<unknown> } {
  const shared = bench.pool(CLIENTS);
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: { connect: () => shared.connect(), end: async () => {} } }),
  });
  if (!hideApi) return { engine: createEngine({ db }), db };
  // The engine looks for the API once, when it is made, through require().
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const load = loader._load;
  let asked = false;
  loader._load = function hidden(this: unknown, request: string, ...rest: unknown[]) {
    if (request === "@opentelemetry/api") {
      asked = true;
      throw Object.assign(new Error(`Cannot find module '${request}'`), { code: "MODULE_NOT_FOUND" });
    }
    return load.call(this, request, ...rest);
  };
  try {
    const engine = createEngine({ db });
    // A cell that silently kept the API would compare the no-op with itself.
    if (!asked) throw new Error("the engine did not look for @opentelemetry/api while it was hidden");
    return { engine, db };
  } finally {
    loader._load = load;
  }
}

function operations(engine: Engine): Record<OtelComparison["path"], Operation> {
  return {
    "new-key": async () => {
      const res = await engine.runOnce(orderOnce, { tenantId: TENANT, key: newKey(), input: INPUT });
      if (res.status !== 201 || res.replayed) throw new Error(`new key answered ${res.status}`);
    },
    replay: async () => {
      const res = await engine.runOnce(orderOnce, { tenantId: "replay", key: replayKey(), input: INPUT });
      if (!res.replayed) throw new Error("replay ran the workflow again");
    },
  };
}

const spread = (per: readonly number[]): Ratio => ({
  median: median(per),
  min: Math.min(...per),
  max: Math.max(...per),
});

/** `a ÷ b` per round (the two measured back to back, in alternating order), then the median. */
async function perRound(rounds: number, a: Operation, b: Operation, durationMs: number): Promise<OtelRatios> {
  const ops: number[] = [];
  const cpu: number[] = [];
  const run = (op: Operation): Promise<RoundResult> => runLoad(op, { concurrency: CLIENTS, durationMs, warmupMs: 250 });
  for (let round = 0; round < rounds; round++) {
    let ra: RoundResult;
    let rb: RoundResult;
    if (round % 2 === 0) {
      ra = await run(a);
      rb = await run(b);
    } else {
      rb = await run(b);
      ra = await run(a);
    }
    if (ra.errors + rb.errors > 0) throw new Error(`otel cell failed: ${String(ra.firstError ?? rb.firstError)}`);
    ops.push(ra.opsPerSec / rb.opsPerSec);
    cpu.push(ra.cpuUsPerOp / rb.cpuUsPerOp);
  }
  return { opsPerSec: spread(ops), cpuPerOp: spread(cpu) };
}

/** `a ÷ b` in client CPU per operation, per count-bounded round (alternating which goes first), then the median. */
async function cpuPerRound(rounds: number, a: Operation, b: Operation): Promise<Ratio> {
  const per: number[] = [];
  await cpuPerOp(a, CPU_OPS / 4, CLIENTS);
  await cpuPerOp(b, CPU_OPS / 4, CLIENTS);
  for (let round = 0; round < rounds; round++) {
    const first = round % 2 === 0 ? a : b;
    const second = first === a ? b : a;
    const cpuFirst = await cpuPerOp(first, CPU_OPS, CLIENTS);
    const cpuSecond = await cpuPerOp(second, CPU_OPS, CLIENTS);
    per.push(first === a ? cpuFirst / cpuSecond : cpuSecond / cpuFirst);
  }
  return spread(per);
}

let spansDropped = 0;
const dropSpans: SpanExporter = {
  export: (spans, done) => {
    spansDropped += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  },
  shutdown: async () => undefined,
};
const dropMetrics: PushMetricExporter = {
  export: (_metrics, done) => done({ code: ExportResultCode.SUCCESS }),
  forceFlush: async () => undefined,
  shutdown: async () => undefined,
};

/** Run the comparisons; leaves nothing registered behind. */
export async function runOtelCells(
  bench: PgBench,
  options: { rounds: number; seconds: number; log: (line: string) => void },
): Promise<OtelComparison[]> {
  const ms = options.seconds * 1000;
  const made = [engineOn(bench, true), engineOn(bench, false)];
  const [absent, noop] = made.map((m) => operations(m.engine)) as [
    ReturnType<typeof operations>,
    ReturnType<typeof operations>,
  ];
  const noopRatios = {
    "new-key": await perRound(options.rounds, noop["new-key"], absent["new-key"], ms),
    replay: await perRound(options.rounds, noop.replay, absent.replay, ms),
  };
  // An even count, so each side goes first equally often.
  const cpuRounds = 4 * options.rounds;
  const noopCpu = {
    "new-key": await cpuPerRound(cpuRounds, noop["new-key"], absent["new-key"]),
    replay: await cpuPerRound(cpuRounds, noop.replay, absent.replay),
  };
  options.log("otel: the API's no-op against no API measured; registering the SDK");

  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropSpans)] });
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: dropMetrics, exportIntervalMillis: 60_000 })],
  });
  const registered = [
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()),
    trace.setGlobalTracerProvider(tracerProvider),
    metrics.setGlobalMeterProvider(meterProvider),
  ];
  try {
    if (registered.includes(false)) throw new Error("an OpenTelemetry global was registered already");
    // Made after the registration, as an application makes its engine after starting its SDK.
    const withSdk = engineOn(bench, false);
    made.push(withSdk);
    const sdk = operations(withSdk.engine);
    const sdkRatios = {
      "new-key": await perRound(options.rounds, sdk["new-key"], absent["new-key"], ms),
      replay: await perRound(options.rounds, sdk.replay, absent.replay, ms),
    };
    await tracerProvider.forceFlush();
    // The SDK side must really have recorded: otherwise it measured a second no-op.
    if (spansDropped === 0) throw new Error("the SDK engine recorded no spans");
    options.log(`otel: the SDK side recorded ${spansDropped} spans`);
    return (["new-key", "replay"] as const).map((path) => ({
      path,
      noop: noopRatios[path],
      noopCpu: noopCpu[path],
      cpuRounds,
      sdk: sdkRatios[path],
    }));
  } finally {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
    trace.disable();
    metrics.disable();
    context.disable();
    for (const m of made) await m.db.destroy();
  }
}

export function otelTable(comparisons: readonly OtelComparison[]): string {
  const cell = (r: Ratio) => `${fmt(r.median, 2)} (${fmt(r.min, 2)}–${fmt(r.max, 2)})`;
  return table(
    [
      "path, 16 clients",
      "API, no SDK ÷ no API: ops/s",
      "client CPU µs/op",
      `client CPU µs/op, ${comparisons[0]?.cpuRounds ?? 0} rounds × ${CPU_OPS} ops`,
      "SDK, exporters that drop ÷ no API: ops/s",
      "client CPU µs/op",
    ],
    comparisons.map((c) => [
      c.path === "new-key" ? "new key, one phase" : "replay",
      cell(c.noop.opsPerSec),
      cell(c.noop.cpuPerOp),
      cell(c.noopCpu),
      cell(c.sdk.opsPerSec),
      cell(c.sdk.cpuPerOp),
    ]),
  );
}
