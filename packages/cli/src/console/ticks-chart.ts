/**
 * The schedules' next ticks on one time axis, from now to the end of the
 * window ahead (the next hour or day): one row per schedule, a mark per
 * tick. A tick already due (no worker fired it yet) is drawn red at the
 * start of the axis; a paused schedule's row says so instead of ticks.
 */
import type { ScheduleTicks } from "@idempo/core";
import { html } from "hono/html";
import { formatDuration } from "../format/duration.js";
import { iso } from "../format/times.js";
import { visible } from "../format/visible.js";

const WIDTH = 1100;
const LABEL = 260;
const NOTE = 200;
const PLOT_W = WIDTH - LABEL - NOTE;
const ROW = 22;
const AXIS = 22;

/** More ticks than this in a row are drawn as one band: they would be closer than the marks are wide. */
const DENSE = 100;

/** What the row's right side says: when the next tick comes. */
function note(s: ScheduleTicks, now: Date): string {
  if (s.schedule.paused) return "paused";
  const first = s.next[0];
  if (!first) return "no tick left";
  const ms = first.getTime() - now.getTime();
  return ms > 0 ? `next in ${formatDuration(ms)}` : `due for ${formatDuration(ms)}`;
}

/** One mark per tick, or one band from the first to the last of many. */
function marks(name: string, ahead: readonly Date[], now: Date, y: number, x: (d: Date) => number, more: boolean) {
  const first = ahead[0];
  const last = ahead[ahead.length - 1];
  if (first && last && ahead.length > DENSE) {
    return html`<rect x="${x(first).toFixed(1)}" y="${y + 6}" width="${Math.max(3, x(last) - x(first)).toFixed(1)}"
      height="${ROW - 12}" fill="#0d9488"><title>${name}: ${ahead.length}${more ? " or more" : ""} ticks, ${iso(first)} to ${iso(last)}</title></rect>`;
  }
  return ahead.map((d) => {
    const due = d.getTime() <= now.getTime();
    return html`<rect x="${(x(d) - 1).toFixed(1)}" y="${y + 4}" width="3" height="${ROW - 8}"
      fill="${due ? "#dc2626" : "#0d9488"}"><title>${name}: ${due ? "due since" : "tick at"} ${iso(d)}</title></rect>`;
  });
}

/**
 * The chart of `schedules` over `[now, now + horizonMs]`, or a sentence
 * when there are none; `tickLimit` is how many next ticks each was read
 * with (a row that used them all may go on past its last one).
 */
export function ticksChart(schedules: readonly ScheduleTicks[], now: Date, horizonMs: number, tickLimit: number) {
  if (schedules.length === 0) return html`<p>No schedules.</p>`;
  const x = (d: Date) => LABEL + (Math.max(0, d.getTime() - now.getTime()) / horizonMs) * PLOT_W;
  const height = schedules.length * ROW + AXIS;
  const axis = [0, 0.25, 0.5, 0.75, 1].map((f) => new Date(now.getTime() + f * horizonMs));
  return html`<svg data-chart="next-ticks" role="img" aria-label="the next ticks of each schedule"
    viewBox="0 0 ${WIDTH} ${height}" width="100%">
    ${axis.map(
      (m, i) => html`<line class="grid" x1="${x(m).toFixed(1)}" x2="${x(m).toFixed(1)}" y1="0" y2="${height - AXIS}" />
        <text x="${x(m).toFixed(1)}" y="${height - 6}" text-anchor="middle">${i === 0 ? "now" : `+${formatDuration(m.getTime() - now.getTime())}`}</text>`,
    )}
    ${schedules.map((s, i) => {
      const y = i * ROW;
      const ahead = s.next.filter((d) => d.getTime() <= now.getTime() + horizonMs);
      const more = ahead.length === tickLimit;
      const name = visible(s.schedule.name);
      return html`<g data-schedule="${s.schedule.name}" data-ticks="${ahead.length}">
        <text x="0" y="${y + 15}">${name}</text>
        ${marks(name, ahead, now, y, x, more)}
        <text x="${WIDTH - NOTE + 8}" y="${y + 15}">${note(s, now)}</text>
      </g>`;
    })}
  </svg>`;
}
