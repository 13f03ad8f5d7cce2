/** The new-key shapes table of the printed result: each way to do the new key's work against the bare INSERT. */
import { median } from "./measure.js";
import type { NewKeyShape } from "./new-key-shapes.js";
import { describeMessages, TODAY } from "./new-key-shapes.js";
import type { Ratio, Results } from "./report.js";
import { fmt, ms, ops, p50, ratio, table, totalCpu } from "./report.js";

/** One row of the new-key shapes table: a way to do the new key's work, against the bare INSERT. */
export interface ShapeRow {
  /** The cells' id without the client count (`<cell>:16` and `<cell>:1`). */
  readonly cell: string;
  readonly shape: string;
  /** The messages, in order, `→` between them. */
  readonly messages: string;
  readonly roundTrips: number;
  readonly commits: number;
  /** 16 clients, median over rounds. */
  readonly opsPerSec: number;
  /** ops/s ÷ the bare INSERT's, 16 clients, per round. */
  readonly opsRatio: Ratio;
  /** 1 client, median over rounds. */
  readonly p50Ms: number;
  /** p50 ÷ the bare INSERT's, 1 client, per round. */
  readonly p50Ratio: Ratio;
  /** Client CPU per operation, 16 clients. */
  readonly cpuUsPerOp: number;
  /** CPU of the bench databases' backends per operation, 16 clients. */
  readonly serverCpuUsPerOp: number;
  /**
   * The bare INSERT's client + server CPU per operation ÷ this row's, 16
   * clients, per round: the throughput ratio the CPU leaves room for when
   * client and server share the machine's cores.
   */
  readonly cpuRatio: Ratio;
}

/**
 * The new key's work in each shape (today's, its regroupings, the bare
 * transaction) against the bare autocommit INSERT: ops/s at 16 clients and
 * p50 at 1 client, the two ratios issue 12 sets for the new key. These are
 * raw node-pg cells, not runOnce, so they are not targets: they show what
 * each change to the SQL shape would let the engine reach at best.
 */
export function shapeRows(results: Results, shapes: readonly NewKeyShape[]): ShapeRow[] {
  const row = (cell: string, shape: string, messages: string, roundTrips: number, commits: number): ShapeRow => {
    const at = (n: number) => results.get(`${cell}:${n}`) ?? [];
    return {
      cell,
      shape,
      messages,
      roundTrips,
      commits,
      opsPerSec: median(at(16).map(ops)),
      opsRatio: ratio(results, `${cell}:16`, "raw:bare-insert:16", ops),
      p50Ms: median(at(1).map(p50)),
      p50Ratio: ratio(results, `${cell}:1`, "raw:bare-insert:1", p50),
      cpuUsPerOp: median(at(16).map((r) => r.cpuUsPerOp)),
      serverCpuUsPerOp: median(at(16).map((r) => r.serverCpuUsPerOp)),
      cpuRatio: ratio(results, "raw:bare-insert:16", `${cell}:16`, totalCpu),
    };
  };
  const today = describeMessages(TODAY);
  return [
    row("idempo:new-key", "idempo runOnce, a one-phase new key", today, TODAY.length, 2),
    row("raw:new-key", "today's shape, its SQL sent named", today, TODAY.length, 2),
    ...shapes.map((s) =>
      row(
        `raw-shape-${s.id}:new-key`,
        `'${s.id}': ${s.label}`,
        describeMessages(s.messages),
        s.messages.length,
        s.commits,
      ),
    ),
    row("raw:bare-txn", "bare transaction, no idempo statement", "BEGIN → INSERT → COMMIT", 3, 1),
    row("raw:bare-insert", "bare autocommit INSERT, no idempo statement", "INSERT", 1, 1),
  ];
}

const spreadText = (r: Ratio) =>
  r.min === r.max ? fmt(r.median, 2) : `${fmt(r.median, 2)} (${fmt(r.min, 2)}–${fmt(r.max, 2)})`;

export function shapeTable(rows: readonly ShapeRow[]): string {
  return table(
    [
      "new key done as",
      "messages, in order (→ between round trips)",
      "round trips",
      "commits",
      "ops/s, 16 clients",
      "÷ bare INSERT (target >= 0.3)",
      "p50 ms, 1 client",
      "÷ bare INSERT p50 (target <= 3.5)",
      "CPU µs/op, 16: client + server",
      "bare INSERT's CPU ÷ this",
    ],
    rows.map((r) => [
      r.shape,
      r.messages,
      String(r.roundTrips),
      String(r.commits),
      fmt(r.opsPerSec),
      spreadText(r.opsRatio),
      ms(r.p50Ms),
      spreadText(r.p50Ratio),
      `${fmt(r.cpuUsPerOp)} + ${fmt(r.serverCpuUsPerOp)}`,
      spreadText(r.cpuRatio),
    ]),
  );
}
