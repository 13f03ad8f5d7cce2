/**
 * Where a run stopped and what a retry would do now, worked out from the
 * record alone, the way the engine's claim would decide it (see the claim
 * state machine in the spec): replay, 409 until the lease runs out, take
 * over and resume after the recovery point, or run again after retention.
 */
import type { HistoryEntry, RunRecord } from "@idempo/core";
import { formatDuration, formatLease } from "./duration.js";

/** One phase or step of the workflow definition the run started under. */
export interface Item {
  readonly kind: "phase" | "step";
  readonly name: string;
}

/** What the next call with the same key and payload gets. */
export type RetryAction =
  | { readonly action: "replay"; readonly status: number; readonly until: Date | null }
  | { readonly action: "run_again"; readonly since: Date | null }
  | {
      readonly action: "wait";
      readonly until: Date;
      readonly retryAfterMs: number;
      readonly resumeAfter: string | null;
    }
  | {
      readonly action: "take_over";
      readonly attempt: number;
      readonly resumeAfter: string | null;
      readonly next: Item | null;
      /**
       * Takeovers before this one that started no phase or step: each was
       * refused before it ran (the input schema parsed the stored input
       * differently than at the claim, or the workflow's items changed), or
       * its process died at once. When it is above 0, the next one will
       * most likely be refused too.
       */
      readonly refusedBefore: number;
    }
  /** Parked: every call gets RunParkedError until an operator unparks, retries from an item, or cancels. */
  | { readonly action: "parked"; readonly reason: string }
  /**
   * Suspended: 409 until `wakeAt` (or until a signal, when `wakeAt` is null),
   * then the retry (or a worker) resumes it after `resumeAfter`; `due`: that time has passed.
   */
  | {
      readonly action: "resume";
      readonly due: boolean;
      readonly wakeAt: Date | null;
      readonly resumeAfter: string | null;
    };

/** Where a run stands, for people and for `--json`. */
export interface Diagnosis {
  /**
   * `completed`, `expired` (completed, past retention), `running` (live lease),
   * `stuck` (lease expired), `parked` (the engine stopped trying it) or
   * `suspended` (waiting for a time or a signal, no owner).
   */
  readonly condition: "completed" | "expired" | "running" | "stuck" | "parked" | "suspended";
  /** The phase or step the run will do next; `null` when completed or nothing is left. */
  readonly next: Item | null;
  /** A step that started and never recorded a result: its call may have reached the other system. */
  readonly inDoubt: HistoryEntry | null;
  /** The last failed entry of the current attempt, when the attempt ended in an error. */
  readonly failure: HistoryEntry | null;
  /** Where it stopped, e.g. `at recovery point create_order, in step charge (started, result unknown)`. */
  readonly stoppedAt: string;
  readonly retry: RetryAction;
}

/** Parse the run's stored definition (`kind:name` strings) into items. */
export function definitionItems(record: RunRecord): Item[] {
  return record.definition.map((entry) => {
    const at = entry.indexOf(":");
    const kind = entry.slice(0, at) === "step" ? "step" : "phase";
    return { kind, name: entry.slice(at + 1) };
  });
}

/** The item after the recovery point (the first item when there is none yet). */
function nextItem(record: RunRecord): Item | null {
  const items = definitionItems(record);
  if (record.recoveryPoint === null) return items[0] ?? null;
  const at = items.findIndex((i) => i.name === record.recoveryPoint);
  return at < 0 ? null : (items[at + 1] ?? null);
}

const label = (item: Item) => `${item.kind} ${item.name}`;

/** Diagnose a record; `now` is the database clock the record was read at. */
export function diagnose(record: RunRecord, now: Date): Diagnosis {
  const history = record.history ?? [];
  const latest = history.at(-1) ?? null;
  if (record.status === "completed") {
    const condition = record.expired ? "expired" : "completed";
    const retry: RetryAction = record.expired
      ? { action: "run_again", since: record.expiresAt }
      : { action: "replay", status: record.response?.status ?? 500, until: record.expiresAt };
    const last = latest ? ` after ${latest.kind} ${latest.name}` : "";
    const outcome = record.response ? ` (${record.response.outcome}, ${record.response.status})` : "";
    return { condition, next: null, inDoubt: null, failure: null, stoppedAt: `completed${last}${outcome}`, retry };
  }
  const next = nextItem(record);
  if (record.status === "parked") {
    const reason = record.parkedReason ?? "parked";
    const point =
      record.recoveryPoint === null ? "before the first recovery point" : `at recovery point ${record.recoveryPoint}`;
    return {
      condition: "parked",
      next,
      inDoubt: null,
      failure: null,
      stoppedAt: `parked ${point}: ${oneLine(reason)}`,
      retry: { action: "parked", reason },
    };
  }
  if (record.status === "suspended") {
    const point =
      record.recoveryPoint === null ? "before the first recovery point" : `at recovery point ${record.recoveryPoint}`;
    const due = record.wakeAt !== null && record.wakeAt.getTime() <= now.getTime();
    return {
      condition: "suspended",
      next,
      inDoubt: null,
      failure: null,
      stoppedAt: `suspended ${point}: ${waitingLabel(record, now)}`,
      retry: { action: "resume", due, wakeAt: record.wakeAt, resumeAfter: record.recoveryPoint },
    };
  }
  const inDoubt = latest?.kind === "step" && latest.outcome === "started" ? latest : null;
  const failure = latest?.outcome === "failed" && latest.attempt === record.attempt ? latest : null;
  const point =
    record.recoveryPoint === null ? "before the first recovery point" : `at recovery point ${record.recoveryPoint}`;
  const live = (record.leaseRemainingMs ?? 0) > 0;
  let where = point;
  if (inDoubt) where += `, in step ${inDoubt.name} (started, ${live ? "no result yet" : "result unknown"})`;
  else if (failure) where += `, ${failure.kind} ${failure.name} failed: ${oneLine(failure.error ?? "unknown error")}`;
  else if (next) where += ` (next: ${label(next)}, not started)`;
  const lease = record.leaseRemainingMs ?? 0;
  if (live) {
    return {
      condition: "running",
      next,
      inDoubt,
      failure,
      stoppedAt: where,
      retry: {
        action: "wait",
        until: new Date(now.getTime() + lease),
        retryAfterMs: lease,
        resumeAfter: record.recoveryPoint,
      },
    };
  }
  return {
    condition: "stuck",
    next,
    inDoubt,
    failure,
    stoppedAt: where,
    retry: {
      action: "take_over",
      attempt: record.attempt + 1,
      resumeAfter: record.recoveryPoint,
      next,
      refusedBefore: silentTakeovers(record),
    },
  };
}

/**
 * Takeovers (attempts 2 and later) after the last attempt that wrote any
 * history. A takeover that passes the engine's checks starts its next item
 * at once and records it; one refused before it runs (WorkflowDefinitionError
 * from the parsed-input check) has claimed the attempt and left no trace.
 */
function silentTakeovers(record: RunRecord): number {
  const lastActive = Math.max(1, ...(record.history ?? []).map((h) => h.attempt));
  return Math.max(0, record.attempt - lastActive);
}

/**
 * What a suspended run waits for, e.g. `sleep grace until 2026-12-08T10:00:00.000Z
 * (in 6d 23h)` or `signal confirmed (no timeout)`; an enqueued run waits for a worker.
 */
export function waitingLabel(record: RunRecord, now: Date): string {
  const w = record.waitingFor;
  const at = record.wakeAt;
  const when = !at
    ? "no timeout"
    : at.getTime() <= now.getTime()
      ? `due since ${iso(at)}`
      : `${w?.kind === "signal" ? "times out" : "wakes"} at ${iso(at)} (in ${formatDuration(at.getTime() - now.getTime())})`;
  if (!w) return `enqueued, not started yet (${when})`;
  return `${w.kind} ${w.name} (${when})`;
}

function oneLine(text: string): string {
  const first = text.split("\n")[0] ?? "";
  return first.length > 120 ? `${first.slice(0, 119)}…` : first;
}

/**
 * The one-line reason a key is stuck, e.g. `lease expired 14m ago at
 * recovery point create_order, in step charge (started, result unknown)`.
 */
export function stuckReason(record: RunRecord, diagnosis: Diagnosis): string {
  const lease = record.leaseRemainingMs ?? 0;
  const head = lease > 0 ? `lease valid (${formatLease(lease)})` : `lease expired ${formatDuration(lease)} ago`;
  return `${head} ${diagnosis.stoppedAt}`;
}

/** What a retry would do now, as a sentence for people. */
export function describeRetry(record: RunRecord, diagnosis: Diagnosis): string {
  const r = diagnosis.retry;
  switch (r.action) {
    case "replay":
      return `replay the stored ${r.status} response${r.until ? ` (kept until ${iso(r.until)})` : ""}`;
    case "run_again":
      return `run the workflow again from the start: the record is past retention${r.since ? ` (since ${iso(r.since)})` : ""} and counts as absent`;
    case "wait":
      // A valid lease says nothing about whether its owner still runs: a live owner's heartbeat
      // renews it again and again, so "until" is the earliest takeover, not a promise of one.
      return (
        `409 key_in_progress while attempt ${record.attempt} holds the lease, valid until ${iso(r.until)} ` +
        `(in ${formatDuration(r.retryAfterMs)}); a live owner's heartbeat keeps renewing it, so a retry takes over ` +
        `only once the owner stops (its process died, or \`idempo keys release\`): then it would ` +
        takeOver(record.attempt + 1, r.resumeAfter, diagnosis)
      );
    case "take_over":
      if (r.refusedBefore > 0) return refusedTakeover(record, r.attempt, r.refusedBefore);
      return `${takeOver(r.attempt, r.resumeAfter, diagnosis)}`;
    case "parked":
      return `fail with RunParkedError (500 run_parked): ${oneLine(r.reason)}; unpark it or retry-from an item once the cause is fixed, or cancel it`;
    case "resume":
      return r.due
        ? `resume it after ${r.resumeAfter ?? "the start"} (it is due; a worker may get there first)`
        : `409 key_in_progress ${r.wakeAt ? `until ${iso(r.wakeAt)}` : "until its signal arrives"}; then a retry or a worker resumes it after ${r.resumeAfter ?? "the start"}`;
  }
}

function refusedTakeover(record: RunRecord, attempt: number, refused: number): string {
  const first = record.attempt - refused + 1;
  const which = refused === 1 ? `attempt ${first}` : `attempts ${first}-${record.attempt}`;
  return (
    `take over as attempt ${attempt}, but ${which} took the run over and started nothing, so the next takeover is ` +
    "most likely refused before it runs too: the workflow's input schema parses the stored input differently " +
    "than at the claim (a default or transform that is not deterministic, such as a random id or the time), or " +
    "its phases and steps changed. Fix the workflow; `idempo resume --workflows <module>` prints the error"
  );
}

function takeOver(attempt: number, resumeAfter: string | null, d: Diagnosis): string {
  const from = resumeAfter === null ? "start from the beginning" : `resume after ${resumeAfter}`;
  let then = "";
  if (d.inDoubt) {
    const key = d.inDoubt.derivedKey ? ` with the same derived key ${d.inDoubt.derivedKey}` : "";
    then = `: call step ${d.inDoubt.name} again${key} (its first call may have gone through; the provider deduplicates on that key)`;
  } else if (d.next) {
    then = `: next ${label(d.next)}`;
  }
  return `take over as attempt ${attempt} and ${from}${then}`;
}

/** ISO 8601 in UTC without milliseconds: what operators paste into log searches. */
export function iso(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}
