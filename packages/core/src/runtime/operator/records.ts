/** The shapes the operations API returns (used by the CLI and by tests). */
import { InputValidationError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import { hasLoneSurrogate } from "../../json/json-value.js";
import type { ChildLink } from "../../store/children.js";
import type { HistoryRow, RecordRow } from "../../store/operations.js";
import type { RunOutcome, RunStatus } from "../../store/run-store.js";
import type { TombstoneRow } from "../../store/tombstones.js";

export type { ChildLink } from "../../store/children.js";
export type { RunOutcome, RunStatus } from "../../store/run-store.js";

/** One call of a step within one attempt: the first try, or an in-process retry. */
export interface StepTry {
  /** What the call threw (its message), cut at 1 000 characters; `null` for the call that succeeded. */
  readonly error: string | null;
  /** How long the call ran, in ms, by the calling process's monotonic clock (the backoff before a retry not included). */
  readonly durationMs: number;
}

/** One phase or step entry in a run's history, oldest first. */
export interface HistoryEntry {
  /**
   * `sleep` and `wait` entries start when the run suspends there and finish
   * when it resumes. A `.parallel` item has one `branch` entry per call of
   * each branch (as a step has per call) and, once every branch is
   * recorded, one `parallel` entry from its first branch's start to its commit.
   */
  readonly kind: "phase" | "step" | "parallel" | "branch" | "child" | "map" | "sleep" | "wait";
  /** The item's name; for a `branch` entry, the name of its parallel item. */
  readonly name: string;
  /** The branch's name for a `branch` entry; `null` for every other kind. */
  readonly branch: string | null;
  /** The run attempt that wrote the entry (1 = first, +1 per takeover). */
  readonly attempt: number;
  /** The derived key a step or branch used downstream; `null` for phases. */
  readonly derivedKey: string | null;
  /**
   * `started`: the step's call may be under way, or in doubt after a crash;
   * `interrupted`: a later attempt found it started and took the step over;
   * `discarded` (wait entries): a stored signal failed the wait's schema and
   * was thrown away, `error` says why; the run waited for another.
   */
  readonly outcome: "started" | "interrupted" | "succeeded" | "failed" | "reconciled" | "discarded";
  readonly error: string | null;
  /** DB clock. */
  readonly startedAt: Date;
  /** DB clock; `null` while started. */
  readonly finishedAt: Date | null;
  /**
   * Every call of a step in this attempt, oldest first, when there was more
   * than one (its `retries`): each with its error and duration. `null` for
   * a step called once (its one call is the entry itself: `error`,
   * `startedAt`, `finishedAt`), for a step whose attempt ended before it
   * recorded (a crash loses the calls' details), and for phases, sleeps and
   * waits.
   */
  readonly tries: readonly StepTry[] | null;
}

/** What a suspended run waits for. */
export interface WaitingFor {
  /**
   * `sleep`: a `.sleep` item; `signal`: a `.waitFor` item; `children`: the
   * children of a `.child` or `.map` item; `queued`: a child waiting for a
   * slot of its `.map`'s `concurrency` (no wake-up time; a sibling's
   * completion makes it due).
   */
  readonly kind: "sleep" | "signal" | "children" | "queued";
  /** The item's name (for `signal`, the name `engine.signal` must use). */
  readonly name: string;
  /**
   * When the run becomes due (DB clock): the wake-up time of a sleep, the
   * timeout of a wait; absent when a wait has no timeout.
   */
  readonly until?: Date;
}

/** The run that started a child run: its key, the `.child` or `.map` item and the child's index in its inputs. */
export interface ParentLink {
  readonly key: string;
  readonly item: string;
  readonly index: number;
}

/** Everything idempo stores about one key. */
export interface RunRecord {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly workflow: string;
  /** The workflow version the run started under (1 for unversioned workflows); see `WorkflowBuilder.version`. */
  readonly workflowVersion: number;
  /** `kind:name` of each phase and step of the definition the run started under. */
  readonly definition: readonly string[];
  /**
   * `in_flight`: an attempt owns it, or its lease ran out (stuck);
   * `completed`: a response is stored (see `response.outcome`);
   * `parked`: the engine stopped trying it (see `parkedReason`);
   * `suspended`: waiting for a time or a signal, with no owner.
   */
  readonly status: RunStatus;
  /** Why a parked run was parked (attempts exhausted, a value that cannot be stored); `null` otherwise. */
  readonly parkedReason: string | null;
  /** When it was parked (DB clock); `null` unless parked. */
  readonly parkedAt: Date | null;
  /**
   * Attempts since the last unpark (or since the start): what the workflow's
   * `maxAttempts` is counted against. Equals `attempt` until a run is unparked.
   */
  readonly attemptsSinceUnpark: number;
  /**
   * Suspended: what the run waits for; `null` otherwise, and for a run that
   * was enqueued and not started yet (it is due at once, see `wakeAt`).
   */
  readonly waitingFor: WaitingFor | null;
  /**
   * Suspended: when a worker or a retry may resume it (DB clock); `null`
   * when it waits for a signal without timeout, or when not suspended.
   */
  readonly wakeAt: Date | null;
  /** The last committed phase or step; `null` before the first commit. */
  readonly recoveryPoint: string | null;
  readonly state: JsonValue;
  readonly input: JsonValue;
  /** Attempts so far: 1 + takeovers (0 for an enqueued run no one started yet; resuming a suspension is not one). */
  readonly attempt: number;
  /** Current owner's token; `null` once completed, parked, or released (no owner: the next retry takes over). */
  readonly ownerToken: string | null;
  /** In flight: ms left on the lease by the DB clock (negative = expired that long ago). `null` once completed. */
  readonly leaseRemainingMs: number | null;
  /** The stored response once completed. */
  readonly response: {
    readonly status: number;
    readonly body: JsonValue;
    /** `canceled`: an operator finished the run with `engine.cancel`. */
    readonly outcome: RunOutcome;
  } | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** When a completed record stops counting (retention). */
  readonly expiresAt: Date | null;
  /**
   * True when the completed record is past retention: a request for the key
   * gets `IdempotencyKeyExpiredError` until `tombstoneUntil`, and runs again
   * as new after it.
   */
  readonly expired: boolean;
  /**
   * Completed: when the key's tombstone ends (`expiresAt` + the workflow's
   * `tombstoneMs`, DB clock); `null` when not completed or `tombstoneMs` is 0.
   */
  readonly tombstoneUntil: Date | null;
  /** Phases and steps in order; only `inspect` fills it. */
  readonly history: readonly HistoryEntry[] | undefined;
  /** Set on a child run (same tenant): the run that started it; `null` otherwise. */
  readonly parent: ParentLink | null;
  /** The child runs this run started, by item and index; only `inspect` fills it (`[]` for none). */
  readonly children: readonly ChildLink[] | undefined;
}

/** What a tombstone holds; see {@link TombstoneRecord}. */
interface TombstoneFields {
  /** Tells a tombstone from a {@link RunRecord}: narrow on it. */
  readonly status: "expired";
  readonly tenantId: string;
  readonly key: string;
  readonly workflow: string;
  /** How the run ended. */
  readonly outcome: RunOutcome;
  /** When the run completed (DB clock). */
  readonly completedAt: Date;
  /** When its record expired: the end of its retention (DB clock). */
  readonly expiresAt: Date;
  readonly expired: true;
  /** When the tombstone goes (DB clock); from then on the key is absent and runs again as new. */
  readonly tombstoneUntil: Date;
}

/**
 * What `inspect` (and `forget`) returns for a key whose completed record
 * expired and was swept, while its tombstone lasts: a request for the key
 * gets `IdempotencyKeyExpiredError` (410) until `tombstoneUntil`. A
 * tombstone keeps no input, state, response, history or signals. The
 * fields of a {@link RunRecord} it does not have are absent (typed
 * `undefined`), so `record?.state` reads as for a missing key; narrow on
 * `status === 'expired'` to tell the two apart. Before the sweeper gets to
 * it, the same key is still shown as its {@link RunRecord} with `expired:
 * true`, and it answers the same.
 */
export type TombstoneRecord = TombstoneFields & {
  readonly [K in Exclude<keyof RunRecord, keyof TombstoneFields>]?: undefined;
};

/** Filters of `listKeys`. */
export interface ListKeysOptions {
  tenantId?: string;
  workflow?: string;
  status?: RunStatus;
  /** Only in-flight runs whose lease has expired (DB clock). */
  stuck?: boolean;
  /** Page size, 1-1000 (Default: 50). */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

/** One page of `listKeys`. */
export interface KeyPage {
  readonly items: readonly RunRecord[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  readonly nextCursor: string | null;
}

export function toRecord(
  row: RecordRow,
  history: HistoryRow[] | undefined,
  children?: readonly ChildLink[],
): RunRecord {
  return {
    tenantId: row.tenant_id,
    key: row.key,
    runId: row.run_id,
    workflow: row.workflow,
    workflowVersion: row.workflow_version,
    definition: JSON.parse(row.definition) as string[],
    status: row.status,
    parkedReason: row.parked_reason,
    parkedAt: row.parked_at,
    attemptsSinceUnpark: row.attempt - row.attempt_floor,
    waitingFor:
      row.status === "suspended" && row.wait_kind !== null && row.wait_name !== null
        ? { kind: row.wait_kind, name: row.wait_name, ...(row.wake_at ? { until: row.wake_at } : {}) }
        : null,
    wakeAt: row.status === "suspended" ? row.wake_at : null,
    recoveryPoint: row.recovery_point,
    state: JSON.parse(row.state) as JsonValue,
    input: JSON.parse(row.input) as JsonValue,
    attempt: row.attempt,
    ownerToken: row.owner_token,
    leaseRemainingMs: row.lease_remaining_ms,
    response:
      row.status === "completed" && row.response_status !== null && row.outcome !== null
        ? {
            status: row.response_status,
            body: JSON.parse(row.response_body ?? "null") as JsonValue,
            outcome: row.outcome,
          }
        : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    expiresAt: row.expires_at,
    expired: row.expired === true,
    tombstoneUntil: row.tombstone_until,
    history: history?.map((h) => ({
      kind: h.kind,
      name: h.name,
      branch: h.branch,
      attempt: h.attempt,
      derivedKey: h.derived_key,
      outcome: h.outcome,
      error: h.error,
      startedAt: h.started_at,
      finishedAt: h.finished_at,
      tries: h.tries === null ? null : (JSON.parse(h.tries) as StepTry[]),
    })),
    parent:
      row.parent_key !== null && row.parent_item !== null && row.child_index !== null
        ? { key: row.parent_key, item: row.parent_item, index: row.child_index }
        : null,
    children,
  };
}

export function toTombstoneRecord(tenantId: string, key: string, row: TombstoneRow): TombstoneRecord {
  return {
    status: "expired",
    tenantId,
    key,
    workflow: row.workflow,
    outcome: row.outcome,
    completedAt: row.completedAt,
    expiresAt: row.expiredAt,
    expired: true,
    tombstoneUntil: row.tombstoneUntil,
  };
}

export function encodeCursor(row: RecordRow): string {
  // The exact text, not a JS Date: Dates keep milliseconds, timestamptz keeps microseconds.
  return Buffer.from(JSON.stringify([row.created_at_exact, row.tenant_id, row.key])).toString("base64url");
}

// PostgreSQL's text form of a timestamptz, as encodeCursor writes it.
const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2}){0,2}$/;

export function decodeCursor(cursor: string): { createdAt: string; tenantId: string; key: string } {
  try {
    const [createdAt, tenantId, key] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown[];
    if (
      typeof createdAt === "string" &&
      TIMESTAMP.test(createdAt) &&
      typeof tenantId === "string" &&
      typeof key === "string" &&
      !hasLoneSurrogate(tenantId + key) &&
      !tenantId.includes("\u0000") &&
      !key.includes("\u0000")
    ) {
      return { createdAt, tenantId, key };
    }
  } catch {
    // fall through to the typed error
  }
  throw new InputValidationError([{ path: "cursor", message: "not a cursor returned by listKeys" }]);
}
