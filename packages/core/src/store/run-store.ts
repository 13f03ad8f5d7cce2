/**
 * The one narrow seam between the runtime and PostgreSQL. Every statement
 * that changes a run lives behind it, one function per statement, so the
 * claim, takeover and fencing SQL can be read in a few files.
 */
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";
import { StatementCalls } from "./statement-calls.js";

export type { Executor } from "./executor.js";

/** Names of the tables in the configured schema. */
export interface Tables {
  readonly schema: string;
  readonly runs: Sql;
  readonly history: Sql;
  readonly migrations: Sql;
  readonly outbox: Sql;
  readonly signals: Sql;
  readonly tombstones: Sql;
  readonly schedules: Sql;
  /** The workflow versions workers registered for the SQL interface (migration 0017). */
  readonly workflowVersions: Sql;
  /** The function naming a key in `tombstones` (migration 0010): `${t.keyDigest}(key)`. */
  readonly keyDigest: Sql;
  /** The function that completes a run (migration 0014); see `markCompleted` in progress.ts. */
  readonly markCompleted: Sql;
  /** The slot fence of a run under a concurrency limit (migration 0022); see `slotFence` in progress.ts. */
  readonly slotCommitAllowed: Sql;
  /** The calls of the statement functions in this schema. */
  readonly calls: StatementCalls;
}

/**
 * @param prepare false to send the statement functions' calls unnamed (see {@link StatementCalls}).
 * @param refusedRetryMs how long a call the database refused without running it is sent again, ms (Default: 0, never).
 */
export function tablesIn(schema: string, prepare = true, refusedRetryMs = 0): Tables {
  return {
    schema,
    calls: new StatementCalls(schema, prepare, refusedRetryMs),
    runs: sql.id(schema, "runs"),
    history: sql.id(schema, "run_history"),
    migrations: sql.id(schema, "schema_migrations"),
    outbox: sql.id(schema, "outbox"),
    signals: sql.id(schema, "signals"),
    tombstones: sql.id(schema, "tombstones"),
    schedules: sql.id(schema, "schedules"),
    workflowVersions: sql.id(schema, "workflow_versions"),
    keyDigest: sql.id(schema, "key_digest"),
    markCompleted: sql.id(schema, "mark_completed"),
    slotCommitAllowed: sql.id(schema, "slot_commit_allowed"),
  };
}

/** A lease length in ms as an SQL interval; the arithmetic happens on the DB clock. */
export function leaseInterval(ms: number): Sql {
  return sql`(${ms}::float8 * interval '1 millisecond')`;
}

/**
 * Where a run stands: `in_flight` (an attempt owns it, or its lease ran
 * out), `completed` (a response is stored), `parked` (the engine stopped
 * trying it), `suspended` (waiting for a time or a signal, no owner).
 */
export type RunStatus = "in_flight" | "completed" | "parked" | "suspended";

/** How a completed run ended. */
export type RunOutcome = "succeeded" | "failed" | "errored" | "canceled";

/** The key record as the claim statement saw it when it could not insert. */
export interface ExistingRun {
  readonly workflow: string;
  readonly fingerprint: string;
  readonly status: RunStatus;
  /** Lease left on the DB clock, ms, at least 0 (in-flight rows). */
  readonly leaseRemainingMs: number;
  /** True when a completed row is past its retention (absent, unless `tombstone` says it still refuses the key). */
  readonly expired: boolean;
  readonly outcome: RunOutcome | null;
  /** Why a parked run was parked. */
  readonly parkedReason: string | null;
  readonly responseStatus: number | null;
  /** The stored body as JSON text, verbatim. */
  readonly responseBody: string | null;
  /**
   * Suspended rows: ms until the wake-up time (DB clock), 0 or less when
   * due; null when it waits for a signal without timeout (or is not suspended).
   */
  readonly wakeRemainingMs: number | null;
  /** Set while the key is tombstoned: its record expired (swept or not) and its tombstone time has not passed. */
  readonly tombstone: Tombstone | null;
}

/** What stays of a completed run once its record expired, until `tombstoneUntil`. */
export interface Tombstone {
  readonly outcome: RunOutcome;
  readonly completedAt: Date;
  /** When the record expired (its retention ended). */
  readonly expiredAt: Date;
  /** When the tombstone goes (DB clock); from then on the key counts as absent. */
  readonly tombstoneUntil: Date;
}

/** What a takeover hands the new owner: everything needed to resume. */
export interface TakenRun {
  readonly runId: string;
  readonly attempt: number;
  readonly recoveryPoint: string | null;
  readonly state: string;
  readonly input: string;
  readonly outline: readonly string[];
  readonly definitionHash: string;
  readonly workflow: string;
  /** The workflow version the run started under (1 for runs of unversioned workflows). */
  readonly workflowVersion: number;
  readonly parsedInputHash: string | null;
}

/**
 * The columns a statement that takes a run (a takeover, the take of a due
 * run) returns for it, the JSON ones as text.
 */
export interface TakenRunRow {
  run_id: string;
  attempt: number;
  recovery_point: string | null;
  state: string;
  input: string;
  definition: string;
  definition_hash: string;
  workflow: string;
  parsed_input_hash: string | null;
  workflow_version: number;
}

/** What the new owner gets of a taken run's row. */
export function takenRunOf(row: TakenRunRow): TakenRun {
  return {
    runId: row.run_id,
    attempt: row.attempt,
    recoveryPoint: row.recovery_point,
    state: row.state,
    input: row.input,
    outline: JSON.parse(row.definition) as string[],
    definitionHash: row.definition_hash,
    workflow: row.workflow,
    workflowVersion: row.workflow_version,
    parsedInputHash: row.parsed_input_hash,
  };
}

/** A key of one tenant: what names a run's record, its history and its tombstone. */
export interface TenantKey {
  readonly tenantId: string;
  readonly key: string;
}

/** The identity every fenced write carries. */
export interface Ownership extends TenantKey {
  readonly runId: string;
  readonly ownerToken: string;
}

/** The final response a completion stores. */
export interface StoredResponse {
  readonly outcome: RunOutcome;
  readonly status: number;
  /** JSON text, stored and replayed byte for byte. */
  readonly body: string;
}

/** What the admission statements (the claim, the enqueue) answer of the record they found, null when none. */
export interface FoundColumns {
  workflow: string | null;
  fingerprint: string | null;
  status: RunStatus | null;
}

/** An admission row that found a record. */
export type Found<R extends FoundColumns> = R & { workflow: string; fingerprint: string; status: RunStatus };

/**
 * Read the one row an admission statement answers: `"made"` when this call
 * wrote the record (`made(row)`), `"raced"` when a concurrent caller
 * committed between the statement's snapshot and its insert (no record
 * read; the caller asks again), else the row of the record found.
 *
 * @throws Error when the statement answered no row (a defect: both statements always answer one).
 */
export function readAdmission<R extends FoundColumns>(
  row: R | undefined,
  made: (row: R) => boolean,
  statement: string,
): "made" | "raced" | Found<R> {
  if (!row) throw new Error(`${statement} statement returned no row`);
  if (made(row)) return "made";
  if (row.status === null || row.workflow === null || row.fingerprint === null) return "raced";
  return row as Found<R>;
}
