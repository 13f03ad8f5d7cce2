/**
 * The tables for the ways to run the engine's statements (unnamed, named,
 * PL/pgSQL functions, fewer round trips) on pg and on PGlite, and for the
 * scale and heap cells.
 */
import type { Path } from "./cells.js";
import type { HeapResult } from "./heap.js";
import { median } from "./measure.js";
import type { Results } from "./report.js";
import { fmt, ms, ratio, table } from "./report.js";
import type { ScaleComparison } from "./scale.js";

const PATHS: [Path, string][] = [
  ["new-key", "new key"],
  ["replay", "replay"],
  ["conflict", "conflict (409)"],
  ["three", "phase/step/phase"],
];

const opsOf = (results: Results, id: string) => median((results.get(id) ?? []).map((r) => r.opsPerSec));

/**
 * Per path: throughput of each way to send the same statements, and its
 * ratio to unnamed statements (what a plain pool gets today), per round.
 */
export function optionsTable(results: Results): string {
  const ops = (r: { opsPerSec: number }) => r.opsPerSec;
  const cell = (id: string, base: string) => {
    if (!results.has(id)) return "–";
    return `${fmt(opsOf(results, id))} (${fmt(ratio(results, id, base, ops).median, 2)})`;
  };
  const rows = PATHS.map(([path, name]) => [
    name,
    fmt(opsOf(results, `raw-unnamed:${path}:16`)),
    cell(`raw:${path}:16`, `raw-unnamed:${path}:16`),
    cell(`raw-fn:${path}:16`, `raw-unnamed:${path}:16`),
    cell(`raw-collapsed:${path}:16`, `raw-unnamed:${path}:16`),
    fmt(opsOf(results, `pglite-raw:${path}:1`)),
    cell(`pglite-fn:${path}:1`, `pglite-raw:${path}:1`),
    cell(`idempo-pglite:${path}:1`, `pglite-raw:${path}:1`),
  ]);
  return table(
    [
      "path",
      "pg 16 clients: unnamed ops/s",
      "named (÷ unnamed)",
      "PL/pgSQL functions (÷ unnamed)",
      "named + autocommit single-statement txns (÷ unnamed)",
      "PGlite 1 client: db.query ops/s",
      "PL/pgSQL functions (÷ db.query)",
      "idempo runOnce (÷ db.query)",
    ],
    rows,
  );
}

export function scaleTable(scale: readonly ScaleComparison[]): string {
  const rows = scale.map((c) => {
    const latency = c.id !== "new-key-big";
    const pick = (r: { p50Ms: number; opsPerSec: number }) => (latency ? r.p50Ms : r.opsPerSec);
    const big = median(c.rounds.map((r) => pick(r.big)));
    const small = median(c.rounds.map((r) => pick(r.small)));
    const per = c.rounds.map((r) => pick(r.big) / pick(r.small));
    return [
      c.label,
      c.bigRows.toLocaleString("en"),
      c.smallRows.toLocaleString("en"),
      latency ? `${ms(big)} ms` : `${fmt(big)} ops/s`,
      latency ? `${ms(small)} ms` : `${fmt(small)} ops/s`,
      `${fmt(median(per), 2)} (${fmt(Math.min(...per), 2)}–${fmt(Math.max(...per), 2)})`,
      c.pages ? `${c.pages.big} / ${c.pages.small}` : "",
      c.seedSeconds > 0 ? fmt(c.seedSeconds) : "",
    ];
  });
  return table(
    ["cell", "big: records", "small: records", "big: p50 or ops/s", "small", "big ÷ small", "pages per call", "seed s"],
    rows,
  );
}

export function heapLine(h: HeapResult): string {
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  return (
    `Client heap after a forced GC: ${mib(h.heapAfterFirst)} MiB after ${h.first.toLocaleString("en")} runs, ` +
    `${mib(h.heapAfterTotal)} MiB after ${h.total.toLocaleString("en")} ` +
    `(ratio ${(h.heapAfterTotal / h.heapAfterFirst).toFixed(3)}; one new key in five, the rest replays, 16 clients).`
  );
}
