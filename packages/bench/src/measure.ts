/**
 * Closed-loop load: `concurrency` workers each run the operation back to
 * back for a fixed time. Throughput is completed operations per second of
 * wall time; latency is per operation, measured around the awaited call.
 * Client CPU (user + system of this process) per operation is reported too,
 * because on a 2-core box the client competes with the server for CPU.
 */
import { performance } from "node:perf_hooks";
import type { ServerCpu } from "./server-cpu.js";
import { serverMsBetween } from "./server-cpu.js";

/** One operation; `worker` is the worker's index (0 .. concurrency-1). */
export type Operation = (worker: number) => Promise<void>;

export interface RoundResult {
  readonly ops: number;
  readonly opsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Client-process CPU time per operation, microseconds. */
  readonly cpuUsPerOp: number;
  /** CPU time of the server's backends for the bench's databases per operation, microseconds (NaN when not sampled). */
  readonly serverCpuUsPerOp: number;
  readonly errors: number;
  readonly firstError: unknown;
}

/** The value at quantile `q` (0..1) of an ascending array (nearest rank). */
function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}

export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Growable list of latencies without per-sample allocation. */
class Samples {
  #data = new Float64Array(1 << 14);
  #length = 0;

  push(value: number): void {
    if (this.#length === this.#data.length) {
      const bigger = new Float64Array(this.#data.length * 2);
      bigger.set(this.#data);
      this.#data = bigger;
    }
    this.#data[this.#length++] = value;
  }

  sorted(): Float64Array {
    return this.#data.slice(0, this.#length).sort();
  }
}

export interface LoadOptions {
  readonly concurrency: number;
  /** Measured time, ms. */
  readonly durationMs: number;
  /** Unmeasured run-in before the measured time, ms (opens pool connections, prepares statements). */
  readonly warmupMs: number;
  /** Measure until this settles instead of for `durationMs` (the sweeper window). */
  readonly until?: Promise<unknown>;
  /** Samples the server's CPU time at the start and end of the measured part (not for PGlite, which runs in this process). */
  readonly serverCpu?: ServerCpu | undefined;
}

/** Client CPU time (user + system) per operation, µs, over `count` operations shared by `clients` workers. */
export async function cpuPerOp(op: Operation, count: number, clients: number): Promise<number> {
  let left = count;
  const start = process.cpuUsage();
  await Promise.all(
    Array.from({ length: clients }, async (_, worker) => {
      while (left-- > 0) await op(worker);
    }),
  );
  const used = process.cpuUsage(start);
  return (used.user + used.system) / count;
}

/** Run `op` under closed-loop load and summarise the measured part. */
export async function runLoad(op: Operation, options: LoadOptions): Promise<RoundResult> {
  if (options.warmupMs > 0) await loop(op, options.concurrency, options.warmupMs, undefined, undefined);
  return loop(op, options.concurrency, options.durationMs, options.until, options.serverCpu);
}

async function loop(
  op: Operation,
  concurrency: number,
  durationMs: number,
  until: Promise<unknown> | undefined,
  serverCpu: ServerCpu | undefined,
): Promise<RoundResult> {
  const samples = new Samples();
  let errors = 0;
  let firstError: unknown;
  let stopped = false;
  void until?.then(
    () => (stopped = true),
    () => (stopped = true),
  );
  const serverStart = await serverCpu?.();
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  // A clock check, not a timer: an in-process database (PGlite) resolves
  // every await as a microtask, and a timer would never get to fire.
  const deadline = until === undefined ? start + durationMs : Number.POSITIVE_INFINITY;
  const worker = async (index: number) => {
    while (!stopped && performance.now() < deadline) {
      const t0 = performance.now();
      try {
        await op(index);
        samples.push(performance.now() - t0);
      } catch (error) {
        errors++;
        firstError ??= error;
        // An erroring cell would spin; keep going but do not hot-loop on a dead server.
        if (errors > 100) stopped = true;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  const elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  const serverEnd = await serverCpu?.();
  const sorted = samples.sorted();
  const serverMs = serverStart && serverEnd ? serverMsBetween(serverStart, serverEnd) : Number.NaN;
  return {
    ops: sorted.length,
    opsPerSec: (sorted.length * 1000) / elapsedMs,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    cpuUsPerOp: sorted.length > 0 ? (cpu.user + cpu.system) / sorted.length : Number.NaN,
    serverCpuUsPerOp: sorted.length > 0 ? (serverMs * 1000) / sorted.length : Number.NaN,
    errors,
    firstError,
  };
}
