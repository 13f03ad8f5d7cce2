/**
 * The run's results as files people can look at: every cell's rounds and the
 * targets as JSON, and the target table drawn as an SVG chart with Vega-Lite
 * (rendered in Node by Vega's headless view; no browser, no native build).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as vega from "vega";
import type { TopLevelSpec } from "vega-lite";
import { compile } from "vega-lite";
import type { Cell } from "./cells.js";
import type { Extra, Results, Target } from "./report.js";
import { met } from "./report.js";
import type { ShapeRow } from "./shape-report.js";
import type { SweepRound } from "./sweeper.js";

export interface RunRecord {
  readonly header: string;
  readonly cells: readonly Cell[];
  readonly results: Results;
  readonly sweeps: readonly SweepRound[];
  readonly extra: Extra;
  readonly targets: readonly Target[];
  /** The new key's work in other shapes against the bare INSERT (not targets). */
  readonly shapes: readonly ShapeRow[];
}

/**
 * How far a target is reached, as one number where 1 is the bound and more
 * is better: ratio ÷ bound for "at least", bound ÷ ratio for "at most".
 */
function attainment(t: Target): number {
  const v = t.ratio.median;
  return t.at === "least" ? v / t.bound : t.bound / v;
}

function chartSpec(targets: readonly Target[]): TopLevelSpec {
  const cap = 3;
  const values = targets.map((t) => ({
    target: t.label,
    reached: Math.min(cap, attainment(t)),
    result: met(t) ? "met" : "missed",
    text: `${t.ratio.median.toFixed(2)} (need ${t.at === "least" ? "≥" : t.at === "most" ? "≤" : "<"} ${t.bound})`,
  }));
  // An explicit order (the table's): a field sort does not survive the layer union.
  const y = { field: "target", type: "nominal", sort: values.map((v) => v.target), title: null } as const;
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: "pnpm bench: each target's ratio against its bound", subtitle: "1 = the bound; right of it = met" },
    width: 420,
    height: { step: 18 },
    data: { values },
    layer: [
      {
        mark: { type: "bar", height: 12 },
        encoding: {
          y,
          x: {
            field: "reached",
            type: "quantitative",
            scale: { domain: [0, cap] },
            title: `ratio ÷ bound (bound ÷ ratio for upper bounds), capped at ${cap}`,
          },
          color: {
            field: "result",
            type: "nominal",
            scale: { domain: ["met", "missed"], range: ["#4c9a5f", "#c8553d"] },
            title: null,
          },
        },
      },
      { mark: { type: "rule", strokeDash: [4, 3] }, encoding: { x: { datum: 1 } } },
      {
        mark: { type: "text", align: "left", dx: 4, fontSize: 10 },
        encoding: { y, x: { field: "reached", type: "quantitative" }, text: { field: "text" } },
      },
    ],
    config: { axisY: { labelLimit: 560 }, font: "sans-serif" },
  };
}

/** The chart as SVG text. */
async function drawTargets(targets: readonly Target[]): Promise<string> {
  const view = new vega.View(vega.parse(compile(chartSpec(targets)).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Write `results.json` and `targets.svg` into `dir`; returns their paths. */
export async function writeResults(dir: string, run: RunRecord): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const json = {
    header: run.header.split("\n"),
    cells: run.cells.map((c) => ({
      id: c.id,
      system: c.system,
      path: c.path,
      concurrency: c.concurrency,
      statements: c.statements ?? null,
      rounds: run.results.get(c.id) ?? [],
    })),
    sweeper: run.sweeps,
    scale: run.extra.scale,
    heap: run.extra.heap ?? null,
    targets: run.targets.map((t) => ({ ...t, met: met(t) })),
    newKeyShapes: run.shapes,
  };
  const files = [join(dir, "results.json"), join(dir, "targets.svg")];
  // firstError is an Error or undefined; keep its message only.
  writeFileSync(
    files[0] as string,
    `${JSON.stringify(json, (k, v) => (k === "firstError" ? (v === undefined ? null : String(v)) : v), 2)}\n`,
  );
  writeFileSync(files[1] as string, await drawTargets(run.targets));
  return files;
}
