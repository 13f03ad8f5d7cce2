/**
 * The documented `--json` shapes (see docs/cli.md). Field names are stable;
 * new fields may be added. Times are ISO 8601 strings (UTC), durations are
 * integer milliseconds measured on the database clock. Stored input, state
 * and response bodies appear only when asked for, because they can hold
 * personal or payment data.
 */
import type { HistoryEntry, RunRecord, RunStatus, StepTry } from "@idempo/core";
import type { Diagnosis, RetryAction, SuspensionFacts } from "./diagnosis.js";

/** One key as `keys list` and `keys stuck` print it with `--json`. */
export interface KeyJson {
  tenantId: string;
  key: string;
  workflow: string;
  status: RunStatus;
  /** Why a parked run was parked; `null` unless parked. */
  parkedReason: string | null;
  /** In flight with an expired lease. */
  stuck: boolean;
  recoveryPoint: string | null;
  attempts: number;
  /** ms left on the lease (negative: expired that long ago); `null` once completed. */
  leaseRemainingMs: number | null;
  ageMs: number;
  createdAt: string;
  updatedAt: string;
  /** When a completed record stops counting (retention); `null` in flight. */
  expiresAt: string | null;
  /** Completed and past retention: a retry gets 410 until `tombstoneUntil`, and runs again after it. */
  expired: boolean;
  /** Completed: when the key's tombstone ends (`expiresAt` + the workflow's `tombstoneMs`); `null` without one. */
  tombstoneUntil: string | null;
  /**
   * Suspended: what the run waits for (`until`: the sleep's wake-up time or
   * the wait's timeout); `null` otherwise and for an enqueued run no worker started.
   */
  waitingFor: { kind: "sleep" | "signal" | "children" | "queued"; name: string; until: string | null } | null;
  /** Suspended: when a worker or a retry may resume it (DB clock); `null` for a signal wait without timeout. */
  wakeAt: string | null;
  /** Suspended: ms until `wakeAt` (0 or negative: due, for that long); `null` when `wakeAt` is. */
  wakesInMs: number | null;
  /** Suspended on a signal wait: whether that signal has been delivered; `null` otherwise. */
  signalDelivered: boolean | null;
}

/** The JSON of one key; `now` is the database clock, `facts` what `deliveredSignals` found for it. */
export function keyJson(record: RunRecord, now: Date, facts: SuspensionFacts = {}): KeyJson {
  return {
    tenantId: record.tenantId,
    key: record.key,
    workflow: record.workflow,
    status: record.status,
    parkedReason: record.parkedReason,
    stuck: record.status === "in_flight" && (record.leaseRemainingMs ?? 0) <= 0,
    recoveryPoint: record.recoveryPoint,
    attempts: record.attempt,
    leaseRemainingMs: record.leaseRemainingMs,
    ageMs: Math.max(0, now.getTime() - record.createdAt.getTime()),
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
    expiresAt: record.expiresAt ? record.expiresAt.toISOString() : null,
    expired: record.expired,
    tombstoneUntil: record.tombstoneUntil ? record.tombstoneUntil.toISOString() : null,
    waitingFor: record.waitingFor
      ? {
          kind: record.waitingFor.kind,
          name: record.waitingFor.name,
          until: record.waitingFor.until ? record.waitingFor.until.toISOString() : null,
        }
      : null,
    wakeAt: record.wakeAt ? record.wakeAt.toISOString() : null,
    wakesInMs: record.wakeAt ? record.wakeAt.getTime() - now.getTime() : null,
    signalDelivered:
      record.status === "suspended" && record.waitingFor?.kind === "signal" ? (facts.signalDelivered ?? null) : null,
  };
}

/** One history entry with its duration. */
interface HistoryJson {
  kind: HistoryEntry["kind"];
  name: string;
  /** The branch of a `branch` entry (`name` is its parallel item); `null` for other kinds. */
  branch: string | null;
  attempt: number;
  outcome: string;
  derivedKey: string | null;
  error: string | null;
  startedAt: string;
  finishedAt: string | null;
  /** `null` while a step is started and unrecorded. */
  durationMs: number | null;
  /** Every call of a retried step (error, durationMs); `null` for a single call and for other kinds. */
  tries: readonly StepTry[] | null;
}

function historyJson(entry: HistoryEntry): HistoryJson {
  return {
    kind: entry.kind,
    name: entry.name,
    branch: entry.branch,
    attempt: entry.attempt,
    outcome: entry.outcome,
    derivedKey: entry.derivedKey,
    error: entry.error,
    startedAt: entry.startedAt.toISOString(),
    finishedAt: entry.finishedAt ? entry.finishedAt.toISOString() : null,
    durationMs: entry.finishedAt ? entry.finishedAt.getTime() - entry.startedAt.getTime() : null,
    tries: entry.tries,
  };
}

/** What a retry would do, with dates as strings. */
type RetryJson =
  | { action: "replay"; status: number; until: string | null }
  | { action: "run_again"; since: string | null }
  | { action: "wait"; until: string; retryAfterMs: number; thenResumeAfter: string | null }
  | { action: "take_over"; attempt: number; resumeAfter: string | null; next: string | null; refusedBefore: number }
  | { action: "refuse_expired"; since: string | null; until: string }
  | { action: "parked"; reason: string }
  | { action: "resume"; attempt: number; resumeAfter: string | null; next: string | null; because: string }
  | {
      action: "suspended";
      kind: "sleep" | "signal" | "children" | "queued";
      name: string;
      until: string | null;
      retryAfterMs: number | null;
      resumeAfter: string | null;
    };

function retryJson(r: RetryAction): RetryJson {
  switch (r.action) {
    case "replay":
      return { action: "replay", status: r.status, until: r.until ? r.until.toISOString() : null };
    case "run_again":
      return { action: "run_again", since: r.since ? r.since.toISOString() : null };
    case "refuse_expired":
      return { action: "refuse_expired", since: r.since ? r.since.toISOString() : null, until: r.until.toISOString() };
    case "wait":
      return {
        action: "wait",
        until: r.until.toISOString(),
        retryAfterMs: r.retryAfterMs,
        thenResumeAfter: r.resumeAfter,
      };
    case "take_over":
      return {
        action: "take_over",
        attempt: r.attempt,
        resumeAfter: r.resumeAfter,
        next: r.next ? `${r.next.kind}:${r.next.name}` : null,
        refusedBefore: r.refusedBefore,
      };
    case "parked":
      return { action: "parked", reason: r.reason };
    case "resume":
      return {
        action: "resume",
        attempt: r.attempt,
        resumeAfter: r.resumeAfter,
        next: r.next ? `${r.next.kind}:${r.next.name}` : null,
        because: r.because,
      };
    case "suspended":
      return {
        action: "suspended",
        kind: r.kind,
        name: r.name,
        until: r.until ? r.until.toISOString() : null,
        retryAfterMs: r.retryAfterMs,
        resumeAfter: r.resumeAfter,
      };
  }
}

/** Everything `keys show --json` prints. */
export interface KeyDetailJson extends KeyJson {
  runId: string;
  ownerToken: string | null;
  /** `kind:name` of each phase and step of the definition the run started under. */
  definition: string[];
  /** Where the run stopped, in words. */
  stoppedAt: string;
  /** A started step whose result was never recorded (its call may have gone through); for a parallel branch, its item. */
  inDoubtStep: string | null;
  /** The branch in doubt when `inDoubtStep` is a parallel item; `null` otherwise. */
  inDoubtBranch: string | null;

  retry: RetryJson;
  history: HistoryJson[];
  /** Present with `--show-response` once completed; otherwise only `status` and `outcome`. */
  response: { status: number; outcome: string; body?: unknown } | null;
  /** Present only with `--show-state`. */
  input?: unknown;
  /** Present only with `--show-state`. */
  state?: unknown;
  /** A child run: the run that started it (same tenant), its `.child` or `.map` item and its index; `null` otherwise. */
  parent: { key: string; item: string; index: number } | null;
  /** The child runs this run started, by item and index. */
  children: { key: string; item: string; index: number; workflow: string; status: RunStatus; outcome: string | null }[];
}

/** The JSON of `keys show`. */
export function keyDetailJson(
  record: RunRecord,
  diagnosis: Diagnosis,
  now: Date,
  show: { state: boolean; response: boolean },
  facts: SuspensionFacts = {},
): KeyDetailJson {
  const detail: KeyDetailJson = {
    ...keyJson(record, now, facts),
    runId: record.runId,
    ownerToken: record.ownerToken,
    definition: [...record.definition],
    stoppedAt: diagnosis.stoppedAt,
    inDoubtStep: diagnosis.inDoubt?.name ?? null,
    inDoubtBranch: diagnosis.inDoubt?.branch ?? null,

    retry: retryJson(diagnosis.retry),
    history: (record.history ?? []).map(historyJson),
    response: record.response
      ? {
          status: record.response.status,
          outcome: record.response.outcome,
          ...(show.response ? { body: record.response.body } : {}),
        }
      : null,
    parent: record.parent ? { ...record.parent } : null,
    children: (record.children ?? []).map((c) => ({ ...c })),
  };
  if (show.state) {
    detail.input = record.input;
    detail.state = record.state;
  }
  return detail;
}
