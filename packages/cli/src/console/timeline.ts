/**
 * A run's phases and steps drawn to scale as SVG: one row per history
 * entry, bars placed on one time axis from the first start to the last end
 * (or the database clock for an entry still running), so a long step or a
 * gap while the key waited for a takeover is visible at a glance, and the
 * branches of a parallel item, indented under it, overlap where they ran at once.
 */
import type { HistoryEntry } from "@idempo/core";
import { html } from "hono/html";
import { formatDuration } from "../format/duration.js";
import { visible } from "../format/visible.js";

const LABEL_WIDTH = 300;
const BAR_WIDTH = 620;
const ROW = 24;

/** Fill colour per outcome. */
const COLOURS: Record<HistoryEntry["outcome"], string> = {
  succeeded: "#16a34a",
  reconciled: "#0d9488",
  failed: "#dc2626",
  started: "#f59e0b",
  interrupted: "#9ca3af",
  discarded: "#d97706",
};

/** What a history entry's outcome reads as: a sleep or wait still open is where a suspended run waits. */
export function entryOutcome(h: { kind: string; outcome: string }, suspended: boolean): string {
  if (h.outcome !== "started" || (h.kind !== "sleep" && h.kind !== "wait")) return h.outcome;
  if (!suspended) return "resuming";
  return h.kind === "sleep" ? "sleeping" : "waiting for the signal";
}

/** A sleep or wait the run is suspended in: drawn in its own colour, up to now. */
const SUSPENDED_COLOUR = "#6366f1";

/**
 * The SVG timeline of `history`; `now` (DB clock) ends entries that have
 * not finished; `suspended` says the run waits in its open sleep or wait.
 */
export function timeline(history: readonly HistoryEntry[], now: Date, suspended = false) {
  if (history.length === 0) return html`<p>No phase, step, sleep or wait has started yet.</p>`;
  const end = (h: HistoryEntry) => (h.finishedAt ?? now).getTime();
  const t0 = Math.min(...history.map((h) => h.startedAt.getTime()));
  const t1 = Math.max(t0 + 1, ...history.map(end));
  const scale = BAR_WIDTH / (t1 - t0);
  const height = history.length * ROW + 24;
  const rows = history.map((h, i) => {
    const x = LABEL_WIDTH + (h.startedAt.getTime() - t0) * scale;
    const width = Math.max(2, (end(h) - h.startedAt.getTime()) * scale);
    const y = i * ROW + 4;
    const took = formatDuration(end(h) - h.startedAt.getTime());
    // A parallel item's branches: indented under the item, their bars side by side on the one time axis.
    const branch = h.kind === "branch";
    const label = branch
      ? `↳ ${visible(h.name)} › ${visible(h.branch ?? "?")} · attempt ${h.attempt}`
      : `${h.kind} ${visible(h.name)} · attempt ${h.attempt}`;
    const shown = entryOutcome(h, suspended);
    const waiting = shown !== h.outcome;
    return html`<g data-entry="${h.kind}:${h.name}:${h.attempt}" data-outcome="${h.outcome}"${branch ? html` data-branch="${h.branch ?? ""}"` : ""}>
      <text x="${branch ? 16 : 0}" y="${y + 15}">${label}</text>
      <rect x="${x.toFixed(1)}" y="${y}" width="${width.toFixed(1)}" height="${ROW - 8}" rx="3"
        fill="${waiting ? SUSPENDED_COLOUR : COLOURS[h.outcome]}"><title>${label}: ${shown}, ${took}</title></rect>
      <text x="${Math.min(x + width + 6, LABEL_WIDTH + BAR_WIDTH - 60).toFixed(1)}" y="${y + 15}">${waiting ? (h.kind === "sleep" ? "sleeping" : "waiting") : h.outcome} ${took}</text>
    </g>`;
  });
  return html`<svg class="timeline" role="img" aria-label="timeline of phases and steps"
    viewBox="0 0 ${LABEL_WIDTH + BAR_WIDTH + 80} ${height}" width="100%">
    ${rows}
    <line x1="${LABEL_WIDTH}" x2="${LABEL_WIDTH + BAR_WIDTH}" y1="${height - 14}" y2="${height - 14}" stroke="currentColor" />
    <text x="${LABEL_WIDTH}" y="${height - 2}">0</text>
    <text x="${LABEL_WIDTH + BAR_WIDTH - 40}" y="${height - 2}">${formatDuration(t1 - t0)}</text>
  </svg>`;
}
