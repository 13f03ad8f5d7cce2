/**
 * Tombstones (migration 0010): what stays of a completed run once its record
 * expired, so that a late retry is refused (410) instead of running again.
 * A key is tombstoned from its record's expiry until `expires_at +
 * tombstone_ms`, first as the expired record itself (until the sweeper
 * gets to it), then as a row of `tombstones`. Each read below answers the
 * same for both, so what a caller gets never depends on the sweeper.
 */

import { deleteDueBatch } from "./maintenance.js";
import type { Executor, RunOutcome, Tables, TenantKey, Tombstone } from "./run-store.js";
import { sql } from "./sql.js";

/** A completed record (of `runs`) whose retention and tombstone time have both passed: the key counts as absent. */
export const pastTombstone = sql`expires_at + tombstone_ms * interval '1 millisecond' <= clock_timestamp()`;

/**
 * Of a record of `runs`: when its tombstone ends, once completed with a
 * tombstone time (past retention a request is refused until then); null
 * otherwise.
 */
export const TOMBSTONE_UNTIL = sql`CASE WHEN status = 'completed' AND tombstone_ms > 0
       THEN expires_at + tombstone_ms * interval '1 millisecond' END`;

/** The tombstone columns a claim or an enqueue reads with the key (all null unless tombstoned). */
export interface TombstoneColumns {
  outcome: RunOutcome | null;
  completed_at: Date | null;
  expires_at: Date | null;
  tombstone_until: Date | null;
}

/** The tombstone those columns describe, or null when the key is not tombstoned. */
export function tombstoneOf(row: TombstoneColumns): Tombstone | null {
  const { outcome, completed_at: completedAt, expires_at: expiredAt, tombstone_until: tombstoneUntil } = row;
  if (tombstoneUntil === null || completedAt === null || expiredAt === null || outcome === null) return null;
  return { outcome, completedAt, expiredAt, tombstoneUntil };
}

/** A live tombstone of `tombstones`, with what a refusal or `inspect` names. */
export interface TombstoneRow extends Tombstone {
  readonly workflow: string;
  /** SHA-256 hex, as `runs.fingerprint` holds it. */
  readonly fingerprint: string;
}

/**
 * The key's tombstone in `tombstones` while its time has not passed; null
 * otherwise (a tombstone past its time counts as absent, swept or not).
 * One primary-key probe.
 */
export async function selectTombstone(db: Executor, t: Tables, k: TenantKey): Promise<TombstoneRow | null> {
  const { rows } = await sql<RawTombstone>`/* idempo:tombstone */
    SELECT ${TOMBSTONE_COLUMNS} FROM ${t.tombstones}
    WHERE tenant_id = ${k.tenantId} AND key_digest = ${t.keyDigest}(${k.key}) AND kept_until > clock_timestamp()
  `.execute(db);
  const row = rows[0];
  return row ? fromRaw(row) : null;
}

interface RawTombstone {
  workflow: string;
  fingerprint: string;
  outcome: RunOutcome;
  completed_at: Date;
  expired_at: Date;
  kept_until: Date;
}

const TOMBSTONE_COLUMNS = sql`workflow, encode(fingerprint, 'hex') AS fingerprint, outcome, completed_at, expired_at,
  kept_until`;

function fromRaw(row: RawTombstone): TombstoneRow {
  return {
    workflow: row.workflow,
    fingerprint: row.fingerprint,
    outcome: row.outcome,
    completedAt: row.completed_at,
    expiredAt: row.expired_at,
    tombstoneUntil: row.kept_until,
  };
}

/**
 * Delete the key's tombstone (`forget`): the key runs again as new at once.
 * Returns it when it was still in force, null when there was none (or only
 * one past its time, which counted as absent anyway).
 */
export async function deleteTombstone(db: Executor, t: Tables, k: TenantKey): Promise<TombstoneRow | null> {
  const { rows } = await sql<RawTombstone & { live: boolean }>`/* idempo:forget_tombstone */
    DELETE FROM ${t.tombstones}
    WHERE tenant_id = ${k.tenantId} AND key_digest = ${t.keyDigest}(${k.key})
    RETURNING ${TOMBSTONE_COLUMNS}, kept_until > clock_timestamp() AS live
  `.execute(db);
  const row = rows[0];
  return row?.live ? fromRaw(row) : null;
}

/**
 * Delete one bounded batch of tombstones past their time; returns how many
 * went. Read in time order from `tombstones_kept_until` (`now()` is an index
 * condition), so a sweep with nothing due reads one index page.
 *
 * Race closed: the record sweep replacing a tombstone of the same key (a
 * key used again after its tombstone) moves `kept_until` on under its row
 * lock; the DELETE re-checks the time against that version and keeps it.
 */
export function sweepTombstoneBatch(db: Executor, t: Tables, batchSize: number): Promise<number> {
  return deleteDueBatch(
    db,
    {
      marker: sql`/* idempo:sweep_tombstones */`,
      table: t.tombstones,
      id: "key_digest",
      due: sql`kept_until <= now()`,
      order: sql`kept_until`,
      stillDue: sql`x.kept_until <= clock_timestamp()`,
    },
    batchSize,
  );
}
