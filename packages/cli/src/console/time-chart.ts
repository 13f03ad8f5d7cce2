/**
 * A chart of numbers over time buckets as server-rendered SVG: stacked bars
 * (counts per bucket) or step lines (a level at the end of each bucket), on
 * one time axis in UTC, with a legend that carries each series' figure.
 * Drawn by hand, as the run timeline is: a few rectangles and paths need
 * no library, and the page stays one static document (no script, no
 * network). Each bucket has a tooltip (`<title>`) with every series' value,
 * and the data is on the elements (`data-series`, `data-values`), so a
 * test reads the figures the chart shows.
 */
import { html } from "hono/html";

/** One series: its key (`data-series`), legend label, colour, and one value per bucket. */
export interface Series {
  readonly name: string;
  readonly label: string;
  readonly colour: string;
  readonly values: readonly number[];
  /** The figure the legend shows (Default: the sum of `values`; a level's chart passes its last value). */
  readonly figure?: number;
}

/** What to draw. */
export interface TimeChart {
  /** `data-chart` of the SVG. */
  readonly id: string;
  /** What the chart shows, for screen readers and the heading's tooltip. */
  readonly description: string;
  readonly buckets: readonly Date[];
  readonly bucketMs: number;
  readonly series: readonly Series[];
  /** `bars`: stacked counts per bucket; `steps`: levels at the end of each bucket. */
  readonly kind: "bars" | "steps";
}

/** Half the page: two charts sit side by side at the size they are drawn. */
const WIDTH = 580;
const HEIGHT = 190;
const LEFT = 44;
const RIGHT = 8;
const TOP = 10;
const BOTTOM = 22;
const PLOT_W = WIDTH - LEFT - RIGHT;
const PLOT_H = HEIGHT - TOP - BOTTOM;

/** The smallest of 1, 2, 5, 10, 20, 50, ... at or above `n` (at least 1): the top of the y axis. */
function niceCeiling(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * power >= n) return step * power;
  return 10 * power;
}

/** `14:05`, in UTC: the database clock's zone, as every time of the console. */
function hhmm(date: Date): string {
  return date.toISOString().slice(11, 16);
}

/** Every how many buckets a time label goes: about eight labels on the axis, on round times. */
function labelEvery(count: number, bucketMs: number): number {
  const minutes = [1, 5, 10, 15, 30, 60, 120, 180, 360].find((m) => (count * bucketMs) / (m * 60_000) <= 8) ?? 720;
  return Math.max(1, Math.round((minutes * 60_000) / bucketMs));
}

/** The legend: a swatch, the label and the series' figure, as text a person reads first. */
function legend(series: readonly Series[]) {
  return html`<ul class="legend">
    ${series.map(
      (s) =>
        html`<li data-series="${s.name}"><span class="swatch" style="background:${s.colour}"></span>${s.label}
          <strong data-figure>${s.figure ?? s.values.reduce((a, b) => a + b, 0)}</strong></li>`,
    )}
  </ul>`;
}

/** The y axis: grid lines at 0, the top and half of it (counts: only when that is a whole number). */
function yAxis(top: number) {
  const marks = top % 2 === 0 ? [0, top / 2, top] : [0, top];
  return marks.map((v) => {
    const y = TOP + PLOT_H - (v / top) * PLOT_H;
    return html`<line class="grid" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y}" y2="${y}" />
      <text x="${LEFT - 6}" y="${y + 4}" text-anchor="end">${v}</text>`;
  });
}

/** The x axis: a time label at round times. */
function xAxis(buckets: readonly Date[], bucketMs: number, slot: number) {
  const every = labelEvery(buckets.length, bucketMs);
  return buckets.map((b, i) =>
    b.getTime() % (every * bucketMs) === 0
      ? html`<text x="${(LEFT + i * slot).toFixed(1)}" y="${HEIGHT - 6}" text-anchor="middle">${hhmm(b)}</text>`
      : "",
  );
}

/** Stacked bars, one rectangle per series and bucket with a value. */
function bars(c: TimeChart, top: number, slot: number) {
  const width = Math.max(1, slot * 0.8);
  return c.buckets.map((_, i) => {
    let base = TOP + PLOT_H;
    return c.series.map((s) => {
      const v = s.values[i] ?? 0;
      if (v === 0) return "";
      const h = (v / top) * PLOT_H;
      base -= h;
      return html`<rect x="${(LEFT + i * slot + (slot - width) / 2).toFixed(1)}" y="${base.toFixed(1)}"
        width="${width.toFixed(1)}" height="${h.toFixed(1)}" fill="${s.colour}" />`;
    });
  });
}

/** One step line per series: the level holds over each bucket. */
function steps(c: TimeChart, top: number, slot: number) {
  return c.series.map((s) => {
    const y = (v: number) => (TOP + PLOT_H - (v / top) * PLOT_H).toFixed(1);
    const x = (i: number) => (LEFT + i * slot).toFixed(1);
    const d = s.values.map((v, i) => (i === 0 ? `M${x(0)} ${y(v)}` : `H${x(i)} V${y(v)}`)).join(" ");
    return html`<path d="${d} H${x(s.values.length)}" fill="none" stroke="${s.colour}" stroke-width="2" />`;
  });
}

/** A transparent column per bucket whose tooltip says every series' value then. */
function tooltips(c: TimeChart, slot: number) {
  return c.buckets.map(
    (b, i) => html`<rect class="hover" x="${(LEFT + i * slot).toFixed(1)}" y="${TOP}" width="${slot.toFixed(1)}"
      height="${PLOT_H}" fill="transparent"><title>${hhmm(b)}–${hhmm(new Date(b.getTime() + c.bucketMs))} UTC: ${c.series
        .map((s) => `${s.label} ${s.values[i] ?? 0}`)
        .join(", ")}</title></rect>`,
  );
}

/** The chart: legend above, SVG below. */
export function timeChart(c: TimeChart) {
  const totals =
    c.kind === "bars"
      ? c.buckets.map((_, i) => c.series.reduce((a, s) => a + (s.values[i] ?? 0), 0))
      : c.series.flatMap((s) => s.values);
  const top = niceCeiling(Math.max(0, ...totals));
  const slot = PLOT_W / Math.max(1, c.buckets.length);
  return html`<figure class="chart">
    ${legend(c.series)}
    <svg data-chart="${c.id}" role="img" aria-label="${c.description}" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%">
      ${yAxis(top)}
      ${c.kind === "bars" ? bars(c, top, slot) : steps(c, top, slot)}
      <line class="axis" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${TOP + PLOT_H}" y2="${TOP + PLOT_H}" />
      ${xAxis(c.buckets, c.bucketMs, slot)}
      ${tooltips(c, slot)}
      ${c.series.map((s) => html`<g data-series="${s.name}" data-values="${s.values.join(",")}"></g>`)}
    </svg>
  </figure>`;
}
