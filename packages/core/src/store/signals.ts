/**
 * `engine.signal`: keep a signal for a run's `.waitFor` item and wake the run
 * when it is suspended on it. Two statements in one transaction: lock the
 * run's row, then read, store and wake; see `checkSignalOrSuspend` for the
 * race this order closes. A stored signal that fails the wait's schema
 * (stored unchecked) is discarded, by the run that reads it or by a
 * corrected delivery, with an entry in the run's history.
 */

import { newId } from "../ids.js";
import { DUE_CHANNEL } from "./notify-channels.js";
import type { Executor, RunStatus, Tables } from "./run-store.js";
import { sql } from "./sql.js";
import { pastTombstone } from "./tombstones.js";

/**
 * The fingerprint of the marker a timed-out wait leaves under its name (a
 * real signal's fingerprint is SHA-256 hex, so the two never meet): the
 * wait went on without its signal, and a signal that comes later is refused.
 */
export const TIMED_OUT = "timed_out";

/** The run a signal is for, as its row lock found it. */
export interface SignalTarget {
  readonly runId: string;
  readonly workflow: string;
  /** The workflow version the run started under. */
  readonly workflowVersion: number;
  readonly status: RunStatus;
  /** The run's attempt number (0 for an enqueued run not yet taken). */
  readonly attempt: number;
  /** `kind:name` outline of the definition the run started under. */
  readonly outline: readonly string[];
  /** A completed record past retention: it counts as absent, or as its tombstone while `tombstoned`. */
  readonly expired: boolean;
  /** Past retention but not past its tombstone's time: a signal is acknowledged and changes nothing. */
  readonly tombstoned: boolean;
}

/**
 * Lock the run's row for the signal's transaction and read what the signal
 * is checked against. Null when the key has no record.
 */
export async function lockRunForSignal(
  tx: Executor,
  t: Tables,
  tenantId: string,
  key: string,
): Promise<SignalTarget | null> {
  const { rows } = await sql<{
    run_id: string;
    workflow: string;
    workflow_version: number;
    status: RunStatus;
    attempt: number;
    definition: string;
    expired: boolean;
    tombstoned: boolean;
  }>`/* idempo:signal_lock */
    SELECT run_id, workflow, workflow_version, status, attempt, definition::text AS definition,
           (status = 'completed' AND expires_at <= clock_timestamp()) AS expired,
           (status = 'completed' AND expires_at <= clock_timestamp() AND NOT ${pastTombstone}) AS tombstoned
    FROM ${t.runs}
    WHERE tenant_id = ${tenantId} AND key = ${key}
    FOR UPDATE
  `.execute(tx);
  const row = rows[0];
  if (!row) return null;
  return {
    runId: row.run_id,
    workflow: row.workflow,
    workflowVersion: row.workflow_version,
    status: row.status,
    attempt: row.attempt,
    outline: JSON.parse(row.definition) as string[],
    expired: row.expired === true,
    tombstoned: row.tombstoned === true,
  };
}

export interface SignalDelivery {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly name: string;
  /** JSON text. */
  readonly payload: string;
  /** SHA-256 hex of the name and canonical payload. */
  readonly fingerprint: string;
  /** False for a completed run: only an identical earlier signal is accepted, nothing new is stored. */
  readonly mayStore: boolean;
}

/** What the delivery found and did. */
export interface SignalStored {
  /** The fingerprint of the signal already delivered under this name, or null. */
  readonly existing: string | null;
  /** That signal's payload as JSON text, or null. */
  readonly existingPayload: string | null;
  readonly stored: boolean;
  /** The run was suspended on this wait and is now due. */
  readonly woke: boolean;
}

/**
 * After {@link lockRunForSignal} in the same transaction: keep the signal
 * unless one is already there under its name, and make the run due when it
 * is suspended on that wait (its wake-up time becomes now, unless already
 * earlier); workers are notified on commit. A second delivery of any
 * signal under the name stores nothing; the caller compares fingerprints.
 *
 * Race closed: the same webhook delivered twice at once. Both lock the run's
 * row first, so the second one reads the first one's signal.
 */
export async function deliverSignal(tx: Executor, t: Tables, d: SignalDelivery): Promise<SignalStored> {
  const { rows } = await sql<{
    existing: string | null;
    existing_payload: string | null;
    stored: number;
    woke: number;
  }>`/* idempo:signal */
    WITH existing AS (
      SELECT fingerprint, payload::text AS payload FROM ${t.signals}
      WHERE tenant_id = ${d.tenantId} AND key = ${d.key} AND run_id = ${d.runId} AND name = ${d.name}
    ), stored AS (
      INSERT INTO ${t.signals} (tenant_id, key, run_id, name, payload, fingerprint)
      SELECT ${d.tenantId}, ${d.key}, ${d.runId}, ${d.name}, ${d.payload}::json, ${d.fingerprint}
      WHERE ${d.mayStore}::boolean AND NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT DO NOTHING
      RETURNING 1
    ), woke AS (
      UPDATE ${t.runs}
      SET wake_at = LEAST(coalesce(wake_at, clock_timestamp()), clock_timestamp()), updated_at = clock_timestamp()
      WHERE tenant_id = ${d.tenantId} AND key = ${d.key} AND run_id = ${d.runId}
        AND status = 'suspended' AND wait_kind = 'signal' AND wait_name = ${d.name}
        AND EXISTS (SELECT 1 FROM stored)
      RETURNING workflow
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM woke
    )
    SELECT (SELECT fingerprint FROM existing) AS existing, (SELECT payload FROM existing) AS existing_payload,
           (SELECT count(*) FROM stored)::int AS stored, (SELECT count(*) FROM notified)::int AS woke
  `.execute(tx);
  const row = rows[0];
  return {
    existing: row?.existing ?? null,
    existingPayload: row?.existing_payload ?? null,
    stored: (row?.stored ?? 0) === 1,
    woke: (row?.woke ?? 0) === 1,
  };
}

/** A stored signal that fails the wait's schema, to be thrown away. */
export interface UnusableSignal {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly name: string;
  /** The fingerprint it was stored with: a signal stored since then is left alone. */
  readonly fingerprint: string;
  /** The attempt the history entry is written under. */
  readonly attempt: number;
  /** Why it cannot be used (the schema's issues), kept as the entry's error. */
  readonly reason: string;
}

/**
 * Discard a stored signal that fails the wait's schema: delete it, so the
 * next signal of that name is a first delivery, and record the discard in
 * the run's history (outcome `discarded`, the reason as its error). The run
 * itself does not change: a run at the wait keeps waiting, with its deadline.
 *
 * Only in a transaction that holds the run's row lock ({@link lockRunForSignal}
 * or `lockOwnRun`): a delivery and the wait both lock it first, so neither
 * can store or read the signal while it is being discarded.
 *
 * @returns false when no signal with that fingerprint was there.
 */
export async function discardSignal(tx: Executor, t: Tables, u: UnusableSignal): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:signal_discard */
    WITH gone AS (
      DELETE FROM ${t.signals}
      WHERE tenant_id = ${u.tenantId} AND key = ${u.key} AND run_id = ${u.runId} AND name = ${u.name}
        AND fingerprint = ${u.fingerprint}
      RETURNING 1
    ), logged AS (
      INSERT INTO ${t.history}
        (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, error, started_at, finished_at)
      SELECT ${u.tenantId}, ${u.key}, ${u.runId}, ${newId()}, 'wait', ${u.name}, ${u.attempt}, 'discarded',
             ${u.reason}, clock_timestamp(), clock_timestamp()
      FROM gone
    )
    SELECT (SELECT count(*) FROM gone)::int AS n
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}
