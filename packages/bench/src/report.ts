/**
 * The printed result: one table of every cell (medians over rounds), the
 * targets as ratios computed per round and then their median, and where
 * the gap between the engine and its own SQL goes.
 */
import type { Cell, Path } from "./cells.js";
import type { HeapResult } from "./heap.js";
import type { RoundResult } from "./measure.js";
import { median } from "./measure.js";
import type { ScaleComparison } from "./scale.js";
import type { SweepRound } from "./sweeper.js";

export type Results = ReadonlyMap<string, readonly RoundResult[]>;

type ShapeSystem = Extract<Cell["system"], `raw-shape-${string}`>;

const SYSTEMS: Record<Exclude<Cell["system"], ShapeSystem>, string> = {
  raw: "node-pg, named statements",
  "raw-unnamed": "node-pg, unnamed statements",
  idempo: "idempo runOnce (pg)",
  "raw-fn": "node-pg, statements as PL/pgSQL functions (unnamed calls)",
  "raw-collapsed": "node-pg, named, one-statement transactions as autocommit",
  "idempo-named": "idempo runOnce (pg, withPreparedStatements)",
  "idempo-limited": "idempo runOnce (pg), workflow with .concurrency",
  "idempo-fanout": "idempo enqueue + worker (pg), 100 children drained",
  "idempo-pglite": "idempo runOnce (PGlite, in-process)",
  "pglite-raw": "PGlite db.query, the same statements",
  "pglite-fn": "PGlite, statements as PL/pgSQL functions",
  dbos: "DBOS Transact",
};

const systemName = (system: Cell["system"]): string =>
  system.startsWith("raw-shape-")
    ? `node-pg, new-key shape '${system.slice("raw-shape-".length)}'`
    : SYSTEMS[system as Exclude<Cell["system"], ShapeSystem>];

const PATHS: Record<Path, string> = {
  "bare-insert": "bare INSERT (autocommit)",
  "bare-txn": "bare BEGIN; INSERT; COMMIT",
  "new-key": "new key, one phase (business INSERT)",
  replay: "replay of a completed key",
  conflict: "conflict (409, key in flight)",
  three: "phase / step / phase, new key",
  "three-writes": "phase (INSERT) / step / phase (INSERT), new key",
  "dbos-three": "3 no-op steps, new workflow ID",
  "dbos-replay": "replay (same workflow ID)",
  "dbos-three-writes": "transaction (INSERT) / step / transaction (INSERT), new workflow ID",
  "map-100": "a parent's .map over 100 one-phase children, enqueued and waited for",
  "enqueue-100": "100 one-phase runs enqueued in one transaction, each waited for",
};

/** A Markdown table, padded so it also reads in a terminal. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(headers), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

export const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "–");
export const ms = (n: number) => fmt(n, n < 10 ? 2 : 1);

function stat(rounds: readonly RoundResult[], pick: (r: RoundResult) => number) {
  const values = rounds.map(pick);
  return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
}

export function cellTable(cells: readonly Cell[], results: Results): string {
  const rows = cells.map((cell) => {
    const rounds = results.get(cell.id) ?? [];
    const ops = stat(rounds, (r) => r.opsPerSec);
    return [
      systemName(cell.system),
      PATHS[cell.path],
      String(cell.concurrency),
      cell.statements === undefined ? "–" : String(cell.statements),
      fmt(ops.median),
      `${fmt(ops.min)}–${fmt(ops.max)}`,
      ms(stat(rounds, (r) => r.p50Ms).median),
      ms(stat(rounds, (r) => r.p99Ms).median),
      fmt(stat(rounds, (r) => r.cpuUsPerOp).median),
      fmt(stat(rounds, (r) => r.serverCpuUsPerOp).median),
    ];
  });
  return table(
    [
      "system",
      "path",
      "clients",
      "stmts",
      "ops/s",
      "ops/s min–max",
      "p50 ms",
      "p99 ms",
      "client CPU µs/op",
      "server CPU µs/op",
    ],
    rows,
  );
}

export interface Ratio {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/** `num ÷ den` per round (rounds are back to back, so drift cancels), then the median. */
export function ratio(results: Results, num: string, den: string, metric: (r: RoundResult) => number): Ratio {
  const a = results.get(num) ?? [];
  const b = results.get(den) ?? [];
  const per = a.map((r, i) => {
    const d = b[i];
    return d ? metric(r) / metric(d) : Number.NaN;
  });
  return { median: median(per), min: Math.min(...per), max: Math.max(...per) };
}

/** Metrics of a round that targets and the shapes table compare. */
export const ops = (r: RoundResult) => r.opsPerSec;
export const p50 = (r: RoundResult) => r.p50Ms;
export const totalCpu = (r: RoundResult) => r.cpuUsPerOp + r.serverCpuUsPerOp;

export interface Target {
  readonly label: string;
  readonly ratio: Ratio;
  readonly at: "least" | "most" | "below";
  readonly bound: number;
}

/** What the scale and heap cells add to the targets (absent when they were not run). */
export interface Extra {
  readonly scale: readonly ScaleComparison[];
  readonly heap: HeapResult | undefined;
}

function spread(per: readonly number[]): Ratio {
  return { median: median(per), min: Math.min(...per), max: Math.max(...per) };
}

function extraTargets(extra: Extra): Target[] {
  const out: Target[] = [];
  for (const c of extra.scale) {
    if (c.id === "new-key-big") {
      out.push({
        label: `new key, 16 clients: ${c.bigRows.toLocaleString("en")} records in runs ÷ an empty table`,
        ratio: spread(c.rounds.map((r) => r.big.opsPerSec / r.small.opsPerSec)),
        at: "least",
        bound: 0.8,
      });
    } else {
      out.push({
        label: `${c.label}: p50 on ${c.bigRows.toLocaleString("en")} records ÷ on ${c.smallRows.toLocaleString("en")}`,
        ratio: spread(c.rounds.map((r) => r.big.p50Ms / r.small.p50Ms)),
        at: "most",
        bound: 2,
      });
    }
  }
  if (extra.heap) {
    const h = extra.heap;
    const r = h.heapAfterTotal / h.heapAfterFirst;
    out.push({
      label: `client heap after ${h.total.toLocaleString("en")} runs ÷ after ${h.first.toLocaleString("en")}, forced GC`,
      ratio: { median: r, min: r, max: r },
      at: "most",
      bound: 1.1,
    });
  }
  return out;
}

export function targets(results: Results, sweeps: readonly SweepRound[], extra: Extra): Target[] {
  const overRaw = (path: Path, name: string): Target => ({
    label: `${name}: idempo ÷ its own SQL on node-pg (named), 16 clients`,
    ratio: ratio(results, `idempo:${path}:16`, `raw:${path}:16`, ops),
    at: "least",
    bound: 0.85,
  });
  const onPglite = (path: Path, name: string): Target => ({
    label: `${name}: idempo on PGlite ÷ its SQL sent straight to PGlite, 1 client`,
    ratio: ratio(results, `idempo-pglite:${path}:1`, `pglite-raw:${path}:1`, ops),
    at: "least",
    bound: 0.85,
  });
  const per = sweeps.map((s) => s.during.p99Ms / s.without.p99Ms);
  return [
    overRaw("new-key", "new key"),
    overRaw("replay", "replay"),
    overRaw("conflict", "conflict (409)"),
    overRaw("three", "phase/step/phase"),
    {
      label: "phase/step/phase with .concurrency ÷ the same without, 16 clients",
      ratio: ratio(results, "idempo-limited:three:16", "idempo:three:16", ops),
      at: "least",
      bound: 0.75,
    },
    {
      label: ".map over 100 children ÷ 100 enqueues by hand, each drained by a worker, 1 client",
      ratio: ratio(results, "idempo-fanout:map-100:1", "idempo-fanout:enqueue-100:1", ops),
      at: "least",
      bound: 0.8,
    },
    {
      label: "new key ÷ bare node-pg INSERT, 16 clients",
      ratio: ratio(results, "idempo:new-key:16", "raw:bare-insert:16", ops),
      at: "least",
      bound: 0.3,
    },
    {
      label: "replay ÷ bare node-pg INSERT, 16 clients",
      ratio: ratio(results, "idempo:replay:16", "raw:bare-insert:16", ops),
      at: "least",
      bound: 0.8,
    },
    {
      label: "phase/step/phase ÷ DBOS 3-step workflow, 16 clients",
      ratio: ratio(results, "idempo:three:16", "dbos:dbos-three:16", ops),
      at: "least",
      bound: 3,
    },
    {
      label: "phase/step/phase ÷ DBOS, equal work (two business INSERTs), 16 clients",
      ratio: ratio(results, "idempo:three-writes:16", "dbos:dbos-three-writes:16", ops),
      at: "least",
      bound: 3,
    },
    {
      label: "replay ÷ DBOS replay, 16 clients",
      ratio: ratio(results, "idempo:replay:16", "dbos:dbos-replay:16", ops),
      at: "least",
      bound: 3,
    },
    {
      label: "latency, 1 client: new key p50 ÷ bare INSERT p50",
      ratio: ratio(results, "idempo:new-key:1", "raw:bare-insert:1", p50),
      at: "most",
      bound: 3.5,
    },
    {
      label: `sweeper: hot-path p99 while deleting expired rows ÷ p99 without`,
      ratio: spread(per),
      at: "below",
      bound: 2,
    },
    onPglite("new-key", "new key"),
    onPglite("replay", "replay"),
    onPglite("conflict", "conflict (409)"),
    onPglite("three", "phase/step/phase"),
    ...extraTargets(extra),
  ];
}

export function met(t: Target): boolean {
  const v = t.ratio.median;
  if (t.at === "least") return v >= t.bound;
  if (t.at === "most") return v <= t.bound;
  return v < t.bound;
}

export function targetTable(list: readonly Target[]): { text: string; missed: number } {
  const rows = list.map((t) => [
    t.label,
    fmt(t.ratio.median, 2),
    `${fmt(t.ratio.min, 2)}–${fmt(t.ratio.max, 2)}`,
    `${t.at === "least" ? ">=" : t.at === "most" ? "<=" : "<"} ${t.bound}`,
    met(t) ? "pass" : "MISS",
  ]);
  return {
    text: table(["target (ratio per round, median)", "ratio", "min–max", "need", "result"], rows),
    missed: list.filter((t) => !met(t)).length,
  };
}

/**
 * Where the throughput between the named-statement limit and runOnce goes,
 * per path at 16 clients: the cost of unnamed statements (measured on raw
 * node-pg), and the engine with and without prepared statements.
 */
export function gapTable(results: Results): string {
  const paths: [Path, string][] = [
    ["new-key", "new key"],
    ["replay", "replay"],
    ["conflict", "conflict (409)"],
    ["three", "phase/step/phase"],
  ];
  const rows = paths.map(([path, name]) => {
    const r = (num: string, den: string) =>
      fmt(ratio(results, `${num}:${path}:16`, `${den}:${path}:16`, ops).median, 2);
    const cpu = (system: string) => fmt(median((results.get(`${system}:${path}:16`) ?? []).map((x) => x.cpuUsPerOp)));
    return [
      name,
      r("raw-unnamed", "raw"),
      r("idempo", "raw-unnamed"),
      r("idempo-named", "raw"),
      r("idempo", "raw"),
      `${cpu("raw")} / ${cpu("raw-unnamed")} / ${cpu("idempo-named")} / ${cpu("idempo")}`,
    ];
  });
  return table(
    [
      "path, 16 clients",
      "raw unnamed ÷ raw named",
      "idempo ÷ raw unnamed",
      "idempo prepared ÷ raw named",
      "idempo ÷ raw named",
      "client CPU µs/op: raw named / raw unnamed / idempo prepared / idempo",
    ],
    rows,
  );
}

export function sweepTable(sweeps: readonly SweepRound[]): string {
  const rows = sweeps.map((s, i) => [
    String(i + 1),
    `${s.deleted}`,
    fmt(s.sweepMs / 1000, 1),
    fmt(s.without.opsPerSec),
    fmt(s.during.opsPerSec),
    ms(s.without.p99Ms),
    ms(s.during.p99Ms),
    fmt(s.during.p99Ms / s.without.p99Ms, 2),
  ]);
  return table(
    ["round", "rows deleted", "sweep s", "ops/s without", "ops/s during", "p99 ms without", "p99 ms during", "ratio"],
    rows,
  );
}
