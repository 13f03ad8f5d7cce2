/**
 * A run's phase and step history as a timeline table: when, how long, which
 * attempt, what happened; the branches of a parallel item also drawn side by side.
 */
import type { HistoryEntry, StepTry } from "@idempo/core";
import type { Paint } from "./colour.js";
import { formatDuration } from "./duration.js";
import type { Row } from "./table.js";
import { renderTable } from "./table.js";
import { visible } from "./visible.js";

/** An entry the run stays suspended at: a sleep, a wait, or the children of a child or map item. */
function suspends(entry: HistoryEntry): boolean {
  return entry.kind === "sleep" || entry.kind === "wait" || entry.kind === "child" || entry.kind === "map";
}

function outcomeLabel(entry: HistoryEntry, live: boolean, paint: Paint, suspended: boolean): string {
  if (entry.outcome === "started" && suspends(entry)) {
    // A sleep, wait, child or map entry stays started while the run is suspended there, until it moves on.
    if (!suspended) return paint("yellow", "resuming");
    const label =
      entry.kind === "sleep"
        ? "sleeping"
        : entry.kind === "wait"
          ? "waiting for the signal"
          : "waiting for the children";
    return paint("yellow", label);
  }
  switch (entry.outcome) {
    case "succeeded":
      return paint("green", "succeeded");
    case "reconciled":
      return paint("green", "reconciled");
    case "failed":
      return paint("red", "failed");
    case "discarded":
      // A stored signal that fails the wait's schema: thrown away, the run waits for another.
      return paint("yellow", "signal discarded");
    case "interrupted":
      return paint("yellow", "interrupted (taken over)");
    case "started":
      return live ? paint("yellow", "started, no result yet") : paint("red", "started, result unknown");
    default:
      return String(entry.outcome);
  }
}

/** One line per call of a retried step: `try 2/3  failed  120ms  <error>`. */
function triesNote(tries: readonly StepTry[], paint: Paint): string {
  return tries
    .map((t, i) => {
      const head = `try ${i + 1}/${tries.length}  ${t.error === null ? paint("green", "succeeded") : paint("red", "failed")}`;
      return `${head}  ${formatDuration(t.durationMs)}${t.error === null ? "" : `  ${paint("red", t.error.replace(/\s*\n\s*/g, " "))}`}`;
    })
    .join("\n");
}

/** Characters of a lane in the branches' drawing. */
const LANE = 30;

/**
 * The branches of one parallel item side by side, one lane per call on the
 * time axis of the group (first start to last end): `█` while a call ran,
 * `░` for one started and never finished (up to the group's end).
 */
function lanesNote(name: string, calls: readonly HistoryEntry[], now: Date, live: boolean, paint: Paint): string {
  const end = (h: HistoryEntry) => (h.finishedAt ?? (live ? now : null))?.getTime() ?? null;
  const t0 = Math.min(...calls.map((h) => h.startedAt.getTime()));
  const t1 = Math.max(t0 + 1, ...calls.map((h) => end(h) ?? h.startedAt.getTime()));
  const cell = (ms: number) => ((ms - t0) / (t1 - t0)) * LANE;
  // A call fills the cells its span touches: from the one it starts in to the one it ends in.
  const first = (ms: number) => Math.min(LANE - 1, Math.floor(cell(ms)));
  const last = (ms: number) => Math.min(LANE - 1, Math.max(0, Math.ceil(cell(ms)) - 1));
  const width = Math.max(...calls.map((h) => visible(h.branch ?? "?").length));
  const lanes = calls.map((h) => {
    const from = first(h.startedAt.getTime());
    const stop = end(h);
    const to = stop === null ? LANE - 1 : Math.max(from, last(stop));
    const bar = Array.from({ length: LANE }, (_, i) => (i < from || i > to ? "·" : stop === null ? "░" : "█")).join("");
    return `  ${visible(h.branch ?? "?").padEnd(width)}  attempt ${h.attempt}  ${bar}  ${h.outcome}`;
  });
  return [
    paint("dim", `branches of ${visible(name)} side by side (${formatDuration(t1 - t0)} in all):`),
    ...lanes,
  ].join("\n");
}

/**
 * Render the history oldest first. `now` (DB clock) gives the running time
 * of a started step; `live` says whether the run's lease is still valid,
 * `suspended` whether the run is suspended (its open sleep or wait entry
 * is where it sleeps, running for as long as it has slept so far).
 */
export function timelineTable(
  history: readonly HistoryEntry[],
  now: Date,
  live: boolean,
  paint: Paint,
  width?: number,
  suspended = false,
): string {
  const rows: Row[] = [];
  // The branch calls of the parallel item drawn last, drawn side by side once its run of entries ends.
  let group: { name: string; calls: HistoryEntry[] } | undefined;
  const flush = () => {
    if (group && group.calls.length > 1) rows.push({ note: lanesNote(group.name, group.calls, now, live, paint) });
    group = undefined;
  };
  history.forEach((entry, i) => {
    const inGroup = (entry.kind === "branch" || entry.kind === "parallel") && group?.name === entry.name;
    if (!inGroup) flush();
    if (entry.kind === "branch") {
      group ??= { name: entry.name, calls: [] };
      group.calls.push(entry);
    }
    const end = entry.finishedAt ?? null;
    const waiting = suspended && suspends(entry);
    // An unfinished entry of a dead attempt has no duration; a live one has been running this long.
    const duration = end
      ? formatDuration(end.getTime() - entry.startedAt.getTime())
      : live || waiting
        ? `${formatDuration(now.getTime() - entry.startedAt.getTime())} so far`
        : "-";
    rows.push([
      String(i + 1),
      `${entry.startedAt.toISOString().slice(0, 23).replace("T", " ")}`,
      entry.kind,
      entry.kind === "branch" ? `${entry.name}/${entry.branch ?? "?"}` : entry.name,
      String(entry.attempt),
      duration,
      outcomeLabel(entry, live, paint, suspended),
    ]);
    if (entry.error) rows.push({ note: paint("red", `error: ${entry.error}`) });
    if (entry.tries) rows.push({ note: triesNote(entry.tries, paint) });
    if (entry.derivedKey && entry.outcome === "started")
      rows.push({ note: paint("dim", `derived key: ${entry.derivedKey}`) });
  });
  flush();
  return renderTable(
    [
      { header: "#", align: "right" },
      { header: "STARTED (UTC)" },
      { header: "KIND" },
      { header: "NAME", shrink: true },
      { header: "ATTEMPT", align: "right" },
      { header: "DURATION", align: "right" },
      { header: "OUTCOME" },
    ],
    rows,
    paint,
    width,
  );
}
