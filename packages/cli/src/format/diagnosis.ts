/**
 * Where a run stopped and what a retry would do now, worked out from the
 * record alone, the way the engine's claim would decide it (see the claim
 * state machine in the spec): replay, 409 until the lease runs out, take
 * over and resume after the recovery point, or run again after retention.
 */
import type { HistoryEntry, RunRecord } from "@idempo/core";
import { formatDuration, formatLease } from "./duration.js";
import type { Item } from "./run-items.js";
import { callInDoubt, callLabel, definitionItems } from "./run-items.js";
import { signalCall } from "./signal-call.js";
import { iso, msUntil, wakeLabel, whenLabel } from "./times.js";
import type { ExpiredRetry } from "./tombstone.js";
import { describeExpired, expiredRetry } from "./tombstone.js";

/**
 * Why a due suspended run is takeable: it was enqueued and never started,
 * its sleep is over, the signal it waits for was delivered, its wait timed
 * out, or (when whether the signal came is not known) one of the last two.
 */
type DueBecause = "enqueued" | "slept" | "signal_delivered" | "timed_out" | "signal_or_timeout";

/** Facts about a suspended run that its record alone does not carry. */
export interface SuspensionFacts {
  /** A signal wait: whether the signal it waits for was delivered (`undefined`: not looked up). */
  readonly signalDelivered?: boolean;
}

/** What the next call with the same key and payload gets. */
export type RetryAction =
  | { readonly action: "replay"; readonly status: number; readonly until: Date | null }
  | ExpiredRetry
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
   * Suspended and due: the retry takes the run and resumes it in the caller
   * (unless a worker gets there first); not a new attempt.
   */
  | {
      readonly action: "resume";
      readonly attempt: number;
      readonly resumeAfter: string | null;
      /** The item the run executes first: the wait itself for a signal wait, else the item after the recovery point. */
      readonly next: Item | null;
      readonly because: DueBecause;
    }
  /**
   * Suspended and not due: 409 `key_in_progress`. `retryAfterMs` is the time
   * to the wake-up; `null` when none is known (a signal wait without
   * timeout: the engine answers with the workflow's lease length then).
   */
  | {
      readonly action: "suspended";
      readonly kind: "sleep" | "signal" | "children" | "queued";
      readonly name: string;
      readonly until: Date | null;
      readonly retryAfterMs: number | null;
      readonly resumeAfter: string | null;
    };

/** Where a run stands, for people and for `--json`. */
export interface Diagnosis {
  /**
   * `completed`, `expired` (completed, past retention), `running` (live lease),
   * `stuck` (lease expired), `parked` (the engine stopped trying it),
   * `suspended` (waiting for a time or a signal) or `due` (suspended, and a
   * worker or a retry may resume it now).
   */
  readonly condition: "completed" | "expired" | "running" | "stuck" | "parked" | "suspended" | "due";
  /** The phase or step the run will do next; `null` when completed or nothing is left. */
  readonly next: Item | null;
  /** A step or parallel branch that started and never recorded a result: its call may have reached the other system. */
  readonly inDoubt: HistoryEntry | null;
  /** The last failed entry of the current attempt, when the attempt ended in an error. */
  readonly failure: HistoryEntry | null;
  /** Where it stopped, e.g. `at recovery point create_order, in step charge (started, result unknown)`. */
  readonly stoppedAt: string;
  readonly retry: RetryAction;
}

/** The item after the recovery point (the first item when there is none yet). */
function nextItem(record: RunRecord): Item | null {
  const items = definitionItems(record);
  if (record.recoveryPoint === null) return items[0] ?? null;
  const at = items.findIndex((i) => i.name === record.recoveryPoint);
  return at < 0 ? null : (items[at + 1] ?? null);
}

const label = (item: Item) => `${item.kind} ${item.name}`;

/**
 * Diagnose a record; `now` is the database clock the record was read at.
 * `facts` completes a suspended run's picture (see {@link SuspensionFacts}).
 */
export function diagnose(record: RunRecord, now: Date, facts: SuspensionFacts = {}): Diagnosis {
  const history = record.history ?? [];
  const latest = history.at(-1) ?? null;
  if (record.status === "completed") {
    const condition = record.expired ? "expired" : "completed";
    const retry: RetryAction = record.expired
      ? expiredRetry(record.expiresAt, record.tombstoneUntil, now)
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
  if (record.status === "suspended") return diagnoseSuspended(record, now, next, facts);
  const inDoubt = callInDoubt(history);
  const failure = latest?.outcome === "failed" && latest.attempt === record.attempt ? latest : null;
  const point =
    record.recoveryPoint === null ? "before the first recovery point" : `at recovery point ${record.recoveryPoint}`;
  const live = (record.leaseRemainingMs ?? 0) > 0;
  let where = point;
  if (inDoubt) where += `, in ${callLabel(inDoubt)} (started, ${live ? "no result yet" : "result unknown"})`;
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

/** The state of a signal wait in words: its timeout, or that it is due and why. */
function signalWaitState(wakeAt: Date | null, due: boolean, facts: SuspensionFacts, now: Date): string {
  if (facts.signalDelivered === true) return `the signal has arrived${wakeAt ? `, due since ${iso(wakeAt)}` : ""}`;
  if (wakeAt === null) return "no timeout";
  if (!due) return `times out ${whenLabel(wakeAt, now)}`;
  if (facts.signalDelivered === false) return `timed out ${whenLabel(wakeAt, now)}`;
  return `due since ${iso(wakeAt)}: the signal arrived or the wait timed out`;
}

/** Why a due run is due. */
function dueBecause(record: RunRecord, facts: SuspensionFacts): DueBecause {
  const w = record.waitingFor;
  if (w === null) return "enqueued";
  if (w.kind === "sleep") return "slept";
  if (facts.signalDelivered === undefined) return "signal_or_timeout";
  return facts.signalDelivered ? "signal_delivered" : "timed_out";
}

/**
 * A suspended run: due once its wake-up time has passed (an enqueued run
 * is due at once; a delivered signal makes its wait due); else it waits.
 * A sleep is its own recovery point; a wait becomes one only once passed,
 * so the run suspended on a wait executes that wait first.
 */
function diagnoseSuspended(record: RunRecord, now: Date, next: Item | null, facts: SuspensionFacts): Diagnosis {
  const w = record.waitingFor;
  const point =
    record.recoveryPoint === null ? "before the first recovery point" : `at recovery point ${record.recoveryPoint}`;
  const first = w?.kind === "signal" ? { kind: "wait" as const, name: w.name } : next;
  const due = record.wakeAt !== null && msUntil(record.wakeAt, now) <= 0;
  const base = { next: first, inDoubt: null, failure: null };
  if (w === null) {
    const since = record.wakeAt ? `, due since ${iso(record.wakeAt)}` : "";
    return {
      ...base,
      condition: "due",
      stoppedAt: `enqueued, not started by a worker yet${since}`,
      retry: {
        action: "resume",
        attempt: Math.max(1, record.attempt),
        resumeAfter: null,
        next: first,
        because: "enqueued",
      },
    };
  }
  let where: string;
  if (w.kind === "sleep") {
    where = `sleeping in sleep ${w.name}${record.wakeAt ? `, ${wakeLabel(record.wakeAt, now)}` : ""}`;
  } else if (w.kind === "children") {
    where = `${point}, waiting for the children of ${w.name}${record.wakeAt ? ` (times out ${whenLabel(record.wakeAt, now)})` : ""}`;
  } else if (w.kind === "queued") {
    where = "a child run waiting for a slot of its parent's map (concurrency)";
  } else {
    where = `${point}, waiting for signal ${w.name} (${signalWaitState(record.wakeAt, due, facts, now)})`;
  }
  if (due) {
    return {
      ...base,
      condition: "due",
      stoppedAt: where,
      retry: {
        action: "resume",
        attempt: Math.max(1, record.attempt),
        resumeAfter: record.recoveryPoint,
        next: first,
        because: dueBecause(record, facts),
      },
    };
  }
  return {
    ...base,
    condition: "suspended",
    stoppedAt: where,
    retry: {
      action: "suspended",
      kind: w.kind,
      name: w.name,
      until: record.wakeAt,
      retryAfterMs: record.wakeAt ? msUntil(record.wakeAt, now) : null,
      resumeAfter: record.recoveryPoint,
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
    case "refuse_expired":
      return describeExpired(r);
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
      return resumeNow(record, r);
    case "suspended":
      return stillSuspended(record, r);
  }
}

/** What follows item `name` in the definition, as `next phase x`, or the response when it is the last. */
function after(record: RunRecord, name: string | null): string {
  const items = definitionItems(record);
  const at = name === null ? -1 : items.findIndex((i) => i.name === name);
  const following = items[at + 1];
  return following ? `next ${label(following)}` : "then build the response";
}

function resumeNow(record: RunRecord, r: Extract<RetryAction, { action: "resume" }>): string {
  const here = `take the run and resume it here as attempt ${r.attempt} (not a new attempt; a worker may get there first)`;
  const from = r.resumeAfter === null ? "from the beginning" : `after ${r.resumeAfter}`;
  const wait = r.next?.kind === "wait" ? r.next.name : "";
  switch (r.because) {
    case "enqueued":
      return `${here}: it was enqueued and no worker has started it; start ${from}: ${after(record, r.resumeAfter)}`;
    case "slept":
      return `${here}: the sleep ${r.resumeAfter ?? ""} is over; resume ${from}: ${after(record, r.resumeAfter)}`;
    case "signal_delivered":
      return `${here}: the signal ${wait} has arrived; merge its payload into state as ${wait}, ${after(record, wait)}`;
    case "timed_out":
      return `${here}: the wait for signal ${wait} timed out; its onTimeout decides (without one, the run completes with a stored 408 wait_timeout)`;
    case "signal_or_timeout":
      return `${here}: the signal ${wait} arrived or the wait timed out; the run reads the signal, or its onTimeout decides`;
  }
}

function stillSuspended(record: RunRecord, r: Extract<RetryAction, { action: "suspended" }>): string {
  const retryAfter =
    r.retryAfterMs === null
      ? "retryAfterMs the workflow's lease length (no wake-up time is known)"
      : `retryAfterMs ${r.retryAfterMs} (${formatDuration(r.retryAfterMs)})`;
  if (r.kind === "sleep") {
    const wakes = r.until ? ` wakes at ${iso(r.until)}` : "";
    return (
      `409 key_in_progress with ${retryAfter}: the sleep ${r.name}${wakes}; then a worker or the next retry ` +
      `resumes it after ${r.name}: ${after(record, r.name)}`
    );
  }
  const timeout = r.until ? `, or the wait times out at ${iso(r.until)}` : "";
  return (
    `409 key_in_progress with ${retryAfter} until the signal ${r.name} arrives${timeout}; ` +
    `send it with ${signalCall(record, r.name)}; then a worker or the next retry merges it into state: ${after(record, r.name)}`
  );
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
    then = `: call ${callLabel(d.inDoubt)} again${key} (its first call may have gone through; the provider deduplicates on that key)`;
  } else if (d.next) {
    then = `: next ${label(d.next)}`;
  }
  return `take over as attempt ${attempt} and ${from}${then}`;
}
