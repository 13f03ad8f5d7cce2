/**
 * `pnpm bench`: every cell in one run on one machine, in rounds. Each round
 * runs every cell back to back (the order rotated per round), so ratios are
 * taken within a round and the median over rounds is reported.
 *
 * Environment:
 * - DATABASE_URL  a server on this machine (Default: postgres://postgres:postgres@127.0.0.1:5432/postgres).
 *                 A scratch database and a DBOS system database are created there and dropped at the end.
 * - BENCH_ROUNDS  rounds per cell (Default: 3).
 * - BENCH_SECONDS measured seconds per cell and round (Default: 2, or 1 with BENCH_ROUNDS=1).
 * - BENCH_SCALE   multiplies the big sizes of the scale cells and the heap cell's run count
 *                 (Default: 1, or 0.1 with BENCH_ROUNDS=1 so a smoke run stays short).
 * - BENCH_BIG_ROWS records under the new-key scale cell (Default: the stale-run cell's 2 M × BENCH_SCALE).
 * - BENCH_PARTS   comma-separated subset of cells,fanout,sweeper,scale,heap,otel (Default: all). `fanout`
 *                 is the .map cell and its by-hand counterpart, with a worker of their own running meanwhile.
 * - BENCH_SYSTEMS comma-separated subset of the cells' systems (the first column of a cell id, such as
 *                 idempo-pglite,pglite-raw); PGlite or DBOS start only when one of their cells is kept
 *                 (Default: every cell).
 * - BENCH_OUT     where results.json and targets.svg go (Default: packages/bench/out).
 */
import { readFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { createDatabase, dropDatabase, uniqueName, withDatabase } from "@idempo/testkit";
import type { Cell } from "./cells.js";
import { dbosCells, engineCells, equalWorkCell, limitedCells, optionCells, rawCells, shapeCells } from "./cells.js";
import type { DbosBench } from "./dbos.js";
import { launchDbos } from "./dbos.js";
import { measureErrorCost } from "./error-cost.js";
import { prepareFanout } from "./fan-out.js";
import type { HeapResult } from "./heap.js";
import { measureHeap } from "./heap.js";
import { measureIdCost } from "./id-cost.js";
import type { RoundResult } from "./measure.js";
import { runLoad } from "./measure.js";
import { heapLine, optionsTable, scaleTable } from "./options-report.js";
import type { OtelComparison } from "./otel.js";
import { otelTable, runOtelCells } from "./otel.js";
import type { PgliteBench } from "./pglite.js";
import { preparePglite } from "./pglite.js";
import { createStatementFunctions } from "./plpgsql.js";
import { cellTable, gapTable, sweepTable, targets, targetTable } from "./report.js";
import { writeResults } from "./results.js";
import type { ScaleComparison } from "./scale.js";
import { runScaleCells, scaleSizes } from "./scale.js";
import type { ServerCpu } from "./server-cpu.js";
import { serverCpu } from "./server-cpu.js";
import type { PgBench } from "./setup.js";
import { preparePostgres } from "./setup.js";
import { shapeRows, shapeTable } from "./shape-report.js";
import type { SweepRound } from "./sweeper.js";
import { EXPIRED_ROWS, sweeperRound } from "./sweeper.js";
import { TENANT } from "./workload.js";

const ROUNDS = positive("BENCH_ROUNDS", 3);
// One round is a smoke run: shorter cells and a tenth of the scale sizes keep it under 3 minutes.
const SECONDS = positive("BENCH_SECONDS", ROUNDS > 1 ? 2 : 1);
const SCALE = positive("BENCH_SCALE", ROUNDS > 1 ? 1 : 0.1);
const BIG_ROWS = process.env.BENCH_BIG_ROWS ? positive("BENCH_BIG_ROWS", 0) : undefined;
const PARTS = new Set(
  (process.env.BENCH_PARTS ?? "cells,fanout,sweeper,scale,heap,otel").split(",").map((p) => p.trim()),
);
const SYSTEMS = process.env.BENCH_SYSTEMS
  ? new Set(process.env.BENCH_SYSTEMS.split(",").map((s) => s.trim()))
  : undefined;
const kept = (system: string): boolean => SYSTEMS === undefined || SYSTEMS.has(system);
const OUT = process.env.BENCH_OUT ?? fileURLToPath(new URL("../out", import.meta.url));
const HEAP_RUNS = Math.round(100_000 * SCALE);
const WARMUP_MS = 250;
const DBOS_SEED_WORKFLOWS = 400;

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`);
  return value;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

function serverUrl(): string {
  const url = process.env.DATABASE_URL ?? "postgres://postgres:postgres@127.0.0.1:5432/postgres";
  const host = new URL(url).hostname;
  if (!["127.0.0.1", "localhost", "[::1]", "::1"].includes(host)) {
    // The ratios assume client and server share this machine and its loopback.
    throw new Error(`DATABASE_URL must point at this machine (127.0.0.1), not ${host}`);
  }
  return url;
}

function pins(): string {
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    dependencies: Record<string, string>;
  };
  const d = manifest.dependencies;
  return `pg ${d.pg}, kysely ${d.kysely}, @dbos-inc/dbos-sdk ${d["@dbos-inc/dbos-sdk"]}, @electric-sql/pglite ${d["@electric-sql/pglite"]}`;
}

/** Which @idempo/core this process runs: the tsc-built package users install, or the TypeScript source. */
function engineBuild(): string {
  const entry = import.meta.resolve("@idempo/core");
  if (entry.endsWith("/dist/index.js")) return "@idempo/core as built by tsc (dist), as installed";
  return `@idempo/core from ${entry.slice(entry.lastIndexOf("/packages/") + 1)} (not the built package)`;
}

async function machine(bench: PgBench): Promise<string> {
  const setting = async (name: string) =>
    (await bench.admin.query<{ v: string }>(`SELECT current_setting($1) AS v`, [name])).rows[0]?.v ?? "?";
  const cpus = os.cpus();
  const pgSettings = await Promise.all(
    ["server_version", "shared_buffers", "synchronous_commit", "fsync", "max_connections"].map(
      async (s) => `${s}=${await setting(s)}`,
    ),
  );
  return [
    `run on ${new Date().toISOString().slice(0, 10)}`,
    `machine: ${cpus.length} × ${cpus[0]?.model ?? "unknown CPU"}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, ${os.type()} ${os.arch()}`,
    `node ${process.version}; ${pins()}`,
    `engine: ${engineBuild()}`,
    `postgres: ${pgSettings.join(", ")} (loopback, same machine)`,
    `load average at start: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
    `rounds: ${ROUNDS} × ${SECONDS} s per cell (+${WARMUP_MS} ms warm-up); medians over rounds; scale ${SCALE}`,
  ].join("\n");
}

/** The engine's statements as PL/pgSQL functions on the scratch database (one session: PREPARE). */
async function pgFunctions(bench: PgBench): Promise<Map<string, string>> {
  const client = await bench.admin.connect();
  try {
    const r = bench.replicas;
    return await createStatementFunctions(client, [r.newKey, r.replay, r.conflict, r.three]);
  } finally {
    client.release();
  }
}

async function seedDbos(dbos: DbosBench): Promise<string[]> {
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (ids.length < DBOS_SEED_WORKFLOWS) ids.push(await dbos.newWorkflow());
    }),
  );
  return ids;
}

function rotated<T>(items: readonly T[], round: number): T[] {
  const shift = (round * Math.ceil(items.length / ROUNDS)) % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** PGlite runs inside this process: its "server" time is already in the client's CPU. */
const inProcess = (cell: Cell): boolean => cell.system === "idempo-pglite" || cell.system.startsWith("pglite-");

async function runRounds(cells: readonly Cell[], server: ServerCpu | undefined): Promise<Map<string, RoundResult[]>> {
  const results = new Map<string, RoundResult[]>(cells.map((c) => [c.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const cell of rotated(cells, round)) {
      const r = await runLoad(cell.op, {
        concurrency: cell.concurrency,
        durationMs: SECONDS * 1000,
        warmupMs: WARMUP_MS,
        serverCpu: inProcess(cell) ? undefined : server,
      });
      results.get(cell.id)?.push(r);
      log(
        `round ${round + 1}/${ROUNDS}  ${cell.id.padEnd(28)} ${r.opsPerSec.toFixed(0).padStart(6)} ops/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  CPU µs/op ${r.cpuUsPerOp.toFixed(0)} + ${r.serverCpuUsPerOp.toFixed(0)}${r.errors ? `  ERRORS ${r.errors}: ${String(r.firstError)}` : ""}`,
      );
    }
  }
  return results;
}

async function main(): Promise<number> {
  const server = serverUrl();
  const name = uniqueName("idempo_bench");
  const dbosName = `${name}_dbos`;
  const url = await createDatabase(server, name);
  // Ctrl-C mid-run still leaves no scratch database behind.
  const interrupted = () => {
    log("interrupted; dropping the scratch databases");
    void Promise.allSettled([dropDatabase(server, name), dropDatabase(server, dbosName)]).then(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  let bench: PgBench | undefined;
  let pglite: PgliteBench | undefined;
  let dbos: DbosBench | undefined;
  try {
    log(`scratch databases ${name} and ${dbosName}`);
    bench = await preparePostgres(url);
    const header = await machine(bench);
    const cells: Cell[] = [];
    if (PARTS.has("cells")) {
      cells.push(
        ...rawCells(bench, 1, true),
        ...shapeCells(bench, 1),
        ...engineCells(bench.engine(1), bench.replicas, 1),
        ...rawCells(bench, 16, true),
        ...shapeCells(bench, 16),
        ...rawCells(bench, 16, false),
        ...(kept("raw-fn") || kept("raw-collapsed") ? optionCells(bench, await pgFunctions(bench)) : []),
        ...engineCells(bench.engine(16), bench.replicas, 16),
        ...limitedCells(bench.engine(16), bench.replicas, 16),
        equalWorkCell(bench.engine(16), bench.equalWorkStatements, 16),
        ...engineCells(bench.engine(16, true), bench.replicas, 16, "idempo-named"),
      );
      if (["idempo-pglite", "pglite-raw", "pglite-fn"].some(kept)) {
        log("starting PGlite");
        pglite = await preparePglite();
        cells.push(...pglite.cells);
      }
      if (kept("dbos")) {
        log("starting DBOS");
        dbos = await launchDbos(withDatabase(server, dbosName), url, 16);
        cells.push(...dbosCells(dbos, await seedDbos(dbos), 16));
      }
    }
    const measured = cells.filter((c) => kept(c.system));
    const results = await runRounds(measured, await serverCpu(bench.admin, [name, dbosName]));
    if (PARTS.has("fanout") && kept("idempo-fanout")) {
      // Their worker runs only while they do: its polling never weighs on the other cells.
      const fanout = await prepareFanout(url);
      try {
        const fanned = await runRounds(fanout.cells, await serverCpu(bench.admin, [name, dbosName]));
        for (const [id, rounds] of fanned) results.set(id, rounds);
        measured.push(...fanout.cells);
      } finally {
        await fanout.close();
      }
    }

    const sweeps: SweepRound[] = [];
    if (PARTS.has("sweeper")) {
      const hotPath = engineCells(bench.engine(16), bench.replicas, 16).find((c) => c.path === "new-key");
      if (!hotPath) throw new Error("no idempo new-key cell at 16 clients");
      for (let round = 0; round < ROUNDS; round++) {
        const s = await sweeperRound(bench, round, hotPath.op, 16, SECONDS * 1000);
        sweeps.push(s);
        log(`sweeper round ${round + 1}/${ROUNDS}: ${s.deleted} rows in ${(s.sweepMs / 1000).toFixed(1)} s`);
      }
    }
    let scale: ScaleComparison[] = [];
    if (PARTS.has("scale")) {
      scale = await runScaleCells(bench, { rounds: ROUNDS, seconds: SECONDS, sizes: scaleSizes(SCALE, BIG_ROWS), log });
    }
    let heap: HeapResult | undefined;
    if (PARTS.has("heap")) {
      log(`heap: ${HEAP_RUNS} runs`);
      heap = await measureHeap(bench.engine(16), Math.round(HEAP_RUNS / 10), HEAP_RUNS);
    }
    // Last: it registers an OpenTelemetry SDK, which would change every engine measured after it.
    let otel: OtelComparison[] = [];
    if (PARTS.has("otel")) otel = await runOtelCells(bench, { rounds: ROUNDS, seconds: SECONDS, log });

    const left = await bench.admin.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = $1 AND status = 'in_flight'",
      [TENANT],
    );
    const errors = [...results.values()].flat().reduce((n, r) => n + r.errors, 0);
    const extra = { scale, heap };
    const list = targets(results, sweeps, extra);
    const table = targetTable(list);
    const shapes = PARTS.has("cells") ? shapeRows(results, bench.shapes) : [];
    const footer = `load average at end: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`;
    console.log(`\n${header}\n${footer}\n`);
    console.log(`${cellTable(measured, results)}\n`);
    console.log(`Targets (16 clients unless stated):\n\n${table.text}\n`);
    console.log(`Where the gap to the engine's own SQL goes:\n\n${gapTable(results)}\n`);
    if (shapes.length > 0) {
      console.log(
        `The new key's work in other SQL shapes, raw node-pg, against the bare INSERT (ratios per round, medians; not targets):\n\n${shapeTable(shapes)}\n`,
      );
    }
    console.log(`Ways to run the engine's statements (ratios per round, medians):\n\n${optionsTable(results)}\n`);
    const ids = measureIdCost();
    console.log(
      `Id minting (runOnce mints 2 ULIDs on replay and 409, 3 on a one-phase new key, 5 on phase/step/phase): ` +
        `ulid() ${ids.defaultUs.toFixed(1)} µs per id with the default generator, ` +
        `${ids.pooledUs.toFixed(1)} µs with a pooled random buffer.\n`,
    );
    const errorCost = await measureErrorCost();
    console.log(
      `The 409's error object, made and caught 6 awaits away (client CPU per error, count-bounded rounds, median): ` +
        `${errorCost.lazyUs.toFixed(1)} µs with its stack taken when first read (IdempotencyKeyInProgressError), ` +
        `${errorCost.eagerUs.toFixed(1)} µs with the stack taken where it is made (an IdempoError); ` +
        `${errorCost.lazyReadUs.toFixed(1)} µs when the 409's stack is then read once.\n`,
    );
    if (sweeps.length > 0) {
      console.log(
        `Sweeper (${EXPIRED_ROWS} expired rows, hot path = new key at 16 clients):\n\n${sweepTable(sweeps)}\n`,
      );
    }
    if (scale.length > 0) {
      console.log(`Scale (p50 of one call at 1 client; new key: ops/s at 16):\n\n${scaleTable(scale)}\n`);
    }
    if (heap) console.log(`${heapLine(heap)}\n`);
    if (otel.length > 0) {
      console.log(`OpenTelemetry on the hot path (ratios per round, medians, min–max):\n\n${otelTable(otel)}\n`);
    }
    const files = await writeResults(OUT, {
      header: `${header}\n${footer}`,
      cells: measured,
      results,
      sweeps,
      extra,
      targets: list,
      shapes,
    });
    log(`wrote ${files.join(" and ")}`);
    console.log(`${table.missed === 0 ? "all targets met" : `${table.missed} target(s) missed`}; errors: ${errors}`);
    if ((left.rows[0]?.n ?? 0) > 0) {
      console.log(`warning: ${left.rows[0]?.n} new-key runs were left in flight`);
      return 1;
    }
    return errors > 0 ? 1 : 0;
  } finally {
    await dbos?.shutdown().catch((e: unknown) => log(`DBOS shutdown: ${String(e)}`));
    await pglite?.db.destroy().catch(() => undefined);
    await bench?.close().catch(() => undefined);
    await dropDatabase(server, name);
    await dropDatabase(server, dbosName);
    log(`dropped ${name} and ${dbosName}`);
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
