/** A run's phase and step history as a timeline table: when, how long, which attempt, what happened. */
import type { HistoryEntry, StepTry } from "@idempo/core";
import type { Paint } from "./colour.js";
import { formatDuration } from "./duration.js";
import type { Row } from "./table.js";
import { renderTable } from "./table.js";

function outcomeLabel(entry: HistoryEntry, live: boolean, paint: Paint, suspended: boolean): string {
  if (entry.outcome === "started" && (entry.kind === "sleep" || entry.kind === "wait")) {
    // A sleep or wait entry stays started while the run is suspended there, until it resumes.
    if (!suspended) return paint("yellow", "resuming");
    return paint("yellow", entry.kind === "sleep" ? "sleeping" : "waiting for the signal");
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
  history.forEach((entry, i) => {
    const end = entry.finishedAt ?? null;
    const waiting = suspended && (entry.kind === "sleep" || entry.kind === "wait");
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
      entry.name,
      String(entry.attempt),
      duration,
      outcomeLabel(entry, live, paint, suspended),
    ]);
    if (entry.error) rows.push({ note: paint("red", `error: ${entry.error}`) });
    if (entry.tries) rows.push({ note: triesNote(entry.tries, paint) });
    if (entry.derivedKey && entry.outcome === "started")
      rows.push({ note: paint("dim", `derived key: ${entry.derivedKey}`) });
  });
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
