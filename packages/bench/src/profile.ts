/**
 * `pnpm --filter @idempo/bench run profile`: where the client's time and
 * allocations go on one `runOnce` path. A fixed number of operations at 16
 * clients against the local PostgreSQL (bounded by count, not time), once
 * under V8's CPU profiler and once under its sampling heap profiler (both
 * through `node:inspector`, so only the measured loop is profiled), each
 * after a warm-up. Prints the client CPU per operation and, per operation,
 * that CPU time and the allocated bytes by package and by function.
 *
 * Environment:
 * - PROFILE_PATH  new-key, replay, conflict, three or three-writes (Default: replay).
 * - PROFILE_OPS   operations per profiled run (Default: 20000).
 * - PROFILE_OUT   a directory to write the .cpuprofile and .heapprofile to, for DevTools (Default: none).
 * - DATABASE_URL  as for `pnpm bench` (loopback only).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { createDatabase, dropDatabase, uniqueName } from "@idempo/testkit";
import type { Path } from "./cells.js";
import { engineCells, equalWorkCell } from "./cells.js";
import { cpuPerOp } from "./measure.js";
import type { Cost, ProfileNode } from "./profile-summary.js";
import { byFunction, byPackage, cpuCosts, heapCosts } from "./profile-summary.js";
import { fmt, table } from "./report.js";
import { preparePostgres } from "./setup.js";

const CLIENTS = 16;
const PATH = (process.env.PROFILE_PATH ?? "replay") as Path;
const OPS = Number(process.env.PROFILE_OPS ?? 20_000);
const OUT = process.env.PROFILE_OUT;
const log = (line: string) => process.stderr.write(`${line}\n`);

function rows(costs: readonly Cost[], digits: number, top: number): string[][] {
  return costs.slice(0, top).map((c) => [c.name, fmt(c.perOp, digits)]);
}

async function main(): Promise<void> {
  if (!Number.isInteger(OPS) || OPS <= 0) throw new Error(`PROFILE_OPS must be a positive integer, got ${OPS}`);
  const server = process.env.DATABASE_URL ?? "postgres://postgres:postgres@127.0.0.1:5432/postgres";
  if (!["127.0.0.1", "localhost", "[::1]", "::1"].includes(new URL(server).hostname)) {
    throw new Error("DATABASE_URL must point at this machine");
  }
  const name = uniqueName("idempo_profile");
  const url = await createDatabase(server, name);
  const bench = await preparePostgres(url);
  try {
    const engine = bench.engine(CLIENTS);
    const cells = [...engineCells(engine, bench.replicas, CLIENTS), equalWorkCell(engine, 0, CLIENTS)];
    const cell = cells.find((c) => c.path === PATH);
    if (!cell) throw new Error(`PROFILE_PATH must be one of ${cells.map((c) => c.path).join(", ")}`);
    const session = new Session();
    session.connect();
    log(`${PATH}: warm-up, then ${OPS} operations at ${CLIENTS} clients under each profiler`);
    await cpuPerOp(cell.op, Math.ceil(OPS / 4), CLIENTS);
    const unprofiled = await cpuPerOp(cell.op, OPS, CLIENTS);

    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 100 });
    await session.post("Profiler.start");
    const profiledCpu = await cpuPerOp(cell.op, OPS, CLIENTS);
    const { profile } = await session.post("Profiler.stop");

    await session.post("HeapProfiler.enable");
    // Every allocation sampled, also those collected before the profile is taken (else only survivors count).
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await cpuPerOp(cell.op, OPS, CLIENTS);
    const { profile: heap } = await session.post("HeapProfiler.stopSampling");
    session.disconnect();
    if (OUT) {
      mkdirSync(OUT, { recursive: true });
      writeFileSync(join(OUT, `${PATH}.cpuprofile`), JSON.stringify(profile));
      writeFileSync(join(OUT, `${PATH}.heapprofile`), JSON.stringify(heap));
    }

    const cpu = cpuCosts(profile.nodes as ProfileNode[], profile.samples ?? [], profiledCpu);
    const bytes = heapCosts(heap.head as ProfileNode, OPS);
    console.log(
      `\n${PATH}, ${OPS} operations at ${CLIENTS} clients: client CPU ${fmt(unprofiled)} µs/op unprofiled, ` +
        `${fmt(profiledCpu)} under the CPU profiler (charged below by each function's share of the busy samples); ` +
        `${fmt(bytes.reduce((n, c) => n + c.perOp, 0))} bytes allocated per op (sampled)\n`,
    );
    console.log(`${table(["where (CPU)", "µs/op"], rows(byPackage(cpu), 1, 20))}\n`);
    console.log(`${table(["function (CPU, self)", "µs/op"], rows(byFunction(cpu), 2, 30))}\n`);
    console.log(`${table(["where (allocations)", "bytes/op"], rows(byPackage(bytes), 0, 20))}\n`);
    console.log(`${table(["function (allocations, self)", "bytes/op"], rows(byFunction(bytes), 0, 30))}`);
  } finally {
    await bench.close();
    await dropDatabase(server, name);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
