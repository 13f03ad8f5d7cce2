/**
 * A run's items as its stored definition names them (`kind:name` entries,
 * read by core's outline reader), and the call of the run that is in doubt:
 * a step, or a branch of a parallel item, that started and never recorded.
 */
import type { HistoryEntry, RunRecord } from "@idempo/core";
import { outlineItem } from "@idempo/core/internal";

/** One item (phase, step, parallel item, sleep or wait for a signal) of the workflow definition the run started under. */
export interface Item {
  readonly kind: "phase" | "step" | "parallel" | "sleep" | "wait";
  readonly name: string;
  /** A parallel item's branch names, in declaration order. */
  readonly branches?: readonly string[];
}

const KINDS: readonly string[] = ["step", "parallel", "sleep", "wait"];

/** Parse the run's stored definition into items. */
export function definitionItems(record: RunRecord): Item[] {
  return record.definition.map((entry) => {
    const { kind, name, branches } = outlineItem(entry);
    const known = (KINDS.includes(kind) ? kind : "phase") as Item["kind"];
    return branches ? { kind: known, name, branches } : { kind: known, name };
  });
}

/**
 * The call a takeover may repeat: the last entry when it is a started step,
 * or, while a parallel item's branches are the last entries, the first of
 * them still started. `null` when there is none.
 */
export function callInDoubt(history: readonly HistoryEntry[]): HistoryEntry | null {
  const latest = history.at(-1);
  if (latest?.kind === "step") return latest.outcome === "started" ? latest : null;
  if (latest?.kind !== "branch") return null;
  let first: HistoryEntry | null = null;
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i] as HistoryEntry;
    if (h.kind !== "branch" || h.name !== latest.name) break;
    if (h.outcome === "started") first = h;
  }
  return first;
}

/** `step charge`, or `branch email of parallel notify`, for a history entry of a call. */
export function callLabel(entry: HistoryEntry): string {
  return entry.kind === "branch"
    ? `branch ${entry.branch ?? "?"} of parallel ${entry.name}`
    : `${entry.kind} ${entry.name}`;
}
