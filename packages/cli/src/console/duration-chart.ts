/**
 * p50 and p95 durations as horizontal bars, one row per workflow (the whole
 * run) followed by a row per item of it, on one logarithmic time axis: a
 * 40 ms step and a 7-day sleep both stay readable side by side. The solid
 * bar ends at p50, the lighter one at p95; the figures are written beside
 * each row, since a person reads the number and the bar only compares.
 */
import type { DurationStats, Overview } from "@idempo/core";
import { html } from "hono/html";
import { formatDuration } from "../format/duration.js";
import { visible } from "../format/visible.js";

const WIDTH = 1100;
const LABEL = 300;
const FIGURES = 250;
const PLOT_W = WIDTH - LABEL - FIGURES;
const ROW = 22;
const TOP = 4;
const AXIS = 22;

/** Round durations for the axis, in ms. */
const MARKS = [1, 10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000, 7 * 86_400_000];

/** One row: a label, and the durations it stands for; `indent` for an item under its workflow. */
interface DurationRow {
  readonly id: string;
  readonly label: string;
  readonly indent: boolean;
  readonly stats: DurationStats;
  readonly failed?: number;
}

/** The rows: each workflow's runs, then its items in the order they run. */
function rowsOf(o: Overview): DurationRow[] {
  const names = [
    ...new Set([...o.workflowDurations.map((w) => w.workflow), ...o.itemDurations.map((i) => i.workflow)]),
  ];
  return names.sort().flatMap((name) => {
    const run = o.workflowDurations.find((w) => w.workflow === name);
    const items = o.itemDurations.filter((i) => i.workflow === name);
    return [
      ...(run ? [{ id: `workflow:${visible(name)}`, label: visible(name), indent: false, stats: run }] : []),
      ...items.map((i) => ({
        id: `item:${visible(name)}:${i.kind}:${visible(i.name)}`,
        label: `${run ? "" : `${visible(name)} · `}${i.kind} ${visible(i.name)}`,
        indent: true,
        stats: i,
        failed: i.failed,
      })),
    ];
  });
}

/** The chart, or a sentence when nothing finished in the window. */
export function durationChart(o: Overview) {
  const rows = rowsOf(o);
  if (rows.length === 0) return html`<p>No run or item finished in this window.</p>`;
  const longest = Math.max(...rows.map((r) => r.stats.p95Ms), 1);
  const top = MARKS.find((m) => m >= longest) ?? longest;
  const x = (ms: number) => LABEL + (Math.log10(Math.max(1, ms)) / Math.max(1, Math.log10(top))) * PLOT_W;
  const height = TOP + rows.length * ROW + AXIS;
  return html`<svg data-chart="durations" role="img" aria-label="p50 and p95 durations per workflow and item"
    viewBox="0 0 ${WIDTH} ${height}" width="100%">
    ${MARKS.filter((m) => m <= top).map(
      (
        m,
      ) => html`<line class="grid" x1="${x(m).toFixed(1)}" x2="${x(m).toFixed(1)}" y1="${TOP}" y2="${height - AXIS}" />
        <text x="${x(m).toFixed(1)}" y="${height - 6}" text-anchor="middle">${formatDuration(m)}</text>`,
    )}
    ${rows.map((r, i) => {
      const y = TOP + i * ROW;
      const { p50Ms, p95Ms, count } = r.stats;
      const failed = r.failed ? ` · ${r.failed} failed` : "";
      const figures = `p50 ${formatDuration(p50Ms)} · p95 ${formatDuration(p95Ms)} · ${count}×${failed}`;
      return html`<g data-row="${r.id}" data-p50="${p50Ms}" data-p95="${p95Ms}" data-count="${count}">
        <text x="${r.indent ? 16 : 0}" y="${y + 15}" class="${r.indent ? "" : "strong"}">${r.label}</text>
        <rect x="${LABEL}" y="${y + 4}" width="${Math.max(2, x(p95Ms) - LABEL).toFixed(1)}" height="${ROW - 8}" rx="2"
          fill="${r.indent ? "#93c5fd" : "#a5b4fc"}" />
        <rect x="${LABEL}" y="${y + 4}" width="${Math.max(2, x(p50Ms) - LABEL).toFixed(1)}" height="${ROW - 8}" rx="2"
          fill="${r.indent ? "#2563eb" : "#4f46e5"}" />
        <text x="${WIDTH - FIGURES + 8}" y="${y + 15}">${figures}</text>
        <title>${r.label}: ${figures}</title>
      </g>`;
    })}
  </svg>`;
}
