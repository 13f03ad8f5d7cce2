/**
 * Read and repair statements for operators (inspect, list, release). None of
 * them is on the hot path.
 */

import type { Executor, RunOutcome, RunStatus, Tables, TenantKey } from "./run-store.js";
import { sql } from "./sql.js";
import type { TombstoneColumns } from "./tombstones.js";
import { pastTombstone, TOMBSTONE_UNTIL } from "./tombstones.js";

export interface RecordRow {
  tenant_id: string;
  key: string;
  run_id: string;
  workflow: string;
  workflow_version: number;
  definition: string;
  status: RunStatus;
  parked_reason: string | null;
  parked_at: Date | null;
  attempt_floor: number;
  wait_kind: "sleep" | "signal" | "children" | "queued" | null;
  wait_name: string | null;
  wake_at: Date | null;
  recovery_point: string | null;
  state: string;
  input: string;
  attempt: number;
  owner_token: string | null;
  lease_remaining_ms: number | null;
  outcome: RunOutcome | null;
  response_status: number | null;
  response_body: string | null;
  created_at: Date;
  /** created_at with full microsecond precision, for paging cursors. */
  created_at_exact: string;
  updated_at: Date;
  expires_at: Date | null;
  expired: boolean;
  /** Completed with a tombstone time: when the tombstone ends (see store/tombstones.ts). */
  tombstone_until: Date | null;
  /** A child run's parent key, item and index (migration 0020); null for other runs. */
  parent_key: string | null;
  parent_item: string | null;
  child_index: number | null;
}

export interface HistoryRow {
  kind: "phase" | "step" | "parallel" | "branch" | "child" | "map" | "sleep" | "wait";
  name: string;
  /** The branch of a `branch` entry (`name` is its parallel item); null for other kinds. */
  branch: string | null;
  attempt: number;
  derived_key: string | null;
  outcome: "started" | "interrupted" | "succeeded" | "failed" | "reconciled" | "discarded";
  error: string | null;
  started_at: Date;
  finished_at: Date | null;
  /** JSON text of a step's calls in its attempt; null for a single call and for other kinds. */
  tries: string | null;
}

/** The columns of a record as operators see it; also the RETURNING list of every operator transition. */
export const RECORD_COLUMNS = sql`
  tenant_id, key, run_id, workflow, workflow_version, definition::text AS definition, status, parked_reason, parked_at,
  attempt_floor, wait_kind, wait_name, wake_at, recovery_point,
  state::text AS state, input::text AS input, attempt, owner_token,
  CASE WHEN status = 'in_flight'
       THEN ceil(extract(epoch FROM (locked_until - clock_timestamp())) * 1000)::float8 END AS lease_remaining_ms,
  outcome, response_status, response_body::text AS response_body, created_at, created_at::text AS created_at_exact,
  updated_at, expires_at,
  (status = 'completed' AND expires_at <= clock_timestamp()) AS expired, ${TOMBSTONE_UNTIL} AS tombstone_until,
  parent_key, parent_item, child_index`;

export async function selectRecord(db: Executor, t: Tables, k: TenantKey): Promise<RecordRow | null> {
  const { rows } = await sql<RecordRow>`
    SELECT ${RECORD_COLUMNS} FROM ${t.runs} WHERE tenant_id = ${k.tenantId} AND key = ${k.key}
  `.execute(db);
  return rows[0] ?? null;
}

export async function selectHistory(db: Executor, t: Tables, k: TenantKey, runId: string): Promise<HistoryRow[]> {
  const { rows } = await sql<HistoryRow>`
    SELECT kind, name, branch, attempt, derived_key, outcome, error, started_at, finished_at, tries::text AS tries
    FROM ${t.history}
    WHERE tenant_id = ${k.tenantId} AND key = ${k.key} AND run_id = ${runId}
    -- A parallel item's entry starts with its first branch: it comes first.
    ORDER BY started_at, kind = 'branch', entry_id
  `.execute(db);
  return rows;
}

export interface ListFilter {
  readonly tenantId: string | undefined;
  readonly workflow: string | undefined;
  readonly status: RunStatus | undefined;
  readonly stuck: boolean;
  readonly limit: number;
  /** Position after which to continue: the last row of the previous page. */
  readonly after: { createdAt: string; tenantId: string; key: string } | undefined;
}

/**
 * One page of records, newest first. `stuck` means in flight with an
 * expired lease (DB clock). Expired completed records are listed as they
 * are until the sweeper removes them.
 */
export async function selectRecords(db: Executor, t: Tables, f: ListFilter): Promise<RecordRow[]> {
  const conditions = [sql`true`];
  if (f.tenantId !== undefined) conditions.push(sql`tenant_id = ${f.tenantId}`);
  if (f.workflow !== undefined) conditions.push(sql`workflow = ${f.workflow}`);
  if (f.status !== undefined) conditions.push(sql`status = ${f.status}`);
  // now(), not clock_timestamp(): the planner estimates the stuck rows from
  // it and reads them from runs_in_flight_locked_until instead of walking
  // every record newest first.
  if (f.stuck) conditions.push(sql`status = 'in_flight' AND locked_until <= now()`);
  if (f.after) {
    conditions.push(
      sql`(created_at, tenant_id, key) < (${f.after.createdAt}::timestamptz, ${f.after.tenantId}, ${f.after.key})`,
    );
  }
  const { rows } = await sql<RecordRow>`
    SELECT ${RECORD_COLUMNS} FROM ${t.runs}
    WHERE ${sql.join(conditions, sql` AND `)}
    ORDER BY created_at DESC, tenant_id DESC, key DESC
    LIMIT ${f.limit}
  `.execute(db);
  return rows;
}

/** Where a run stands for someone waiting on it (`engine.wait`). */
export interface OutcomeRow extends TombstoneColumns {
  status: RunStatus;
  expired: boolean;
  response_status: number | null;
  response_body: string | null;
  parked_reason: string | null;
  /** In flight: ms left on the lease (DB clock). */
  lease_remaining_ms: number | null;
  /** Suspended: ms until the wake-up time, null without one. */
  wake_remaining_ms: number | null;
}

/** One read-only statement per poll of a waiter; null when the key has no record. */
export async function selectOutcome(db: Executor, t: Tables, k: TenantKey): Promise<OutcomeRow | null> {
  const { rows } = await sql<OutcomeRow>`/* idempo:wait_poll */
    SELECT status, (status = 'completed' AND expires_at <= clock_timestamp()) AS expired, outcome, response_status,
           completed_at, expires_at,
           -- Set only while tombstoned: past retention, not past the tombstone's time.
           CASE WHEN status = 'completed' AND expires_at <= clock_timestamp() AND NOT ${pastTombstone}
                THEN ${TOMBSTONE_UNTIL} END AS tombstone_until,
           response_body::text AS response_body, parked_reason,
           CASE WHEN status = 'in_flight'
                THEN ceil(extract(epoch FROM (locked_until - clock_timestamp())) * 1000)::float8 END AS lease_remaining_ms,
           CASE WHEN status = 'suspended'
                THEN ceil(extract(epoch FROM (wake_at - clock_timestamp())) * 1000)::float8 END AS wake_remaining_ms
    FROM ${t.runs} WHERE tenant_id = ${k.tenantId} AND key = ${k.key}
  `.execute(db);
  return rows[0] ?? null;
}
