/**
 * The state transitions that stop, repair or end a run from outside its
 * owner: park, release, cancel, unpark, retry from an item, forget. One
 * statement each, with its guard in the WHERE clause: the status it starts
 * from, and the owner token or lease it must (or must not) find. A verb
 * that races an owner, a resumer or another operator either wins the row
 * lock and changes the record, or re-checks its guard against the winner's
 * version and changes nothing (the caller then reads why).
 */

import type { RecordRow } from "./operations.js";
import { RECORD_COLUMNS } from "./operations.js";
import { markCompleted } from "./progress.js";
import type { Executor, Ownership, StoredResponse, Tables, TenantKey } from "./run-store.js";
import { sql } from "./sql.js";

/**
 * The owner parks its own run: it hit an error no retry can cure (a value
 * that cannot be stored). Drops owner and lease so nothing takes it over.
 *
 * Race closed: a zombie parking a run its successor now owns. Fenced on the
 * owner token: the zombie matches nothing and learns it lost the lease.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function parkOwnRun(db: Executor, t: Tables, own: Ownership, reason: string): Promise<boolean> {
  const { rows } = await sql`/* idempo:park */
    UPDATE ${t.runs}
    SET status = 'parked', parked_reason = ${reason}, parked_at = clock_timestamp(),
        owner_token = NULL, locked_until = NULL, updated_at = clock_timestamp()
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
      AND owner_token = ${own.ownerToken} AND status = 'in_flight'
    RETURNING 1
  `.execute(db);
  return rows.length === 1;
}

/**
 * The owner gives its key up when its attempt ran past its bound: owner
 * and lease end now, so the next retry takes over at once and every write
 * the attempt still tries is fenced out.
 *
 * Race closed: the bound firing while a takeover already happened (the
 * lease had run out meanwhile). Fenced on the owner token: it then matches
 * nothing and leaves the successor's lease alone.
 *
 * @returns false when the attempt no longer owned the key.
 */
export async function giveUpOwnLease(db: Executor, t: Tables, own: Ownership): Promise<boolean> {
  const { rows } = await sql`/* idempo:give_up */
    UPDATE ${t.runs}
    SET owner_token = NULL, locked_until = LEAST(locked_until, clock_timestamp()), updated_at = clock_timestamp()
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
      AND owner_token = ${own.ownerToken} AND status = 'in_flight'
    RETURNING 1
  `.execute(db);
  return rows.length === 1;
}

/**
 * Release: end the current lease for good, so the next retry or resumer
 * takes over at once. The owner token goes with it, so a live owner's next
 * renewal or write matches nothing (its signal aborts, its transaction
 * rolls back with LeaseLostError) and cannot renew the lease back. An
 * already expired lease keeps its `locked_until`: how long a run has been
 * stuck, and the order in which resumers pick runs up, do not change.
 *
 * Race closed: release against the live owner's heartbeat. A renewal that
 * commits first is overwritten (LEAST with now); a renewal after it is
 * fenced on the token this statement cleared.
 *
 * @returns the updated record, or null when the run is not in flight (or absent).
 */
export async function releaseLease(db: Executor, t: Tables, k: TenantKey): Promise<RecordRow | null> {
  const { rows } = await sql<RecordRow>`/* idempo:release */
    UPDATE ${t.runs}
    SET owner_token = NULL, locked_until = LEAST(locked_until, clock_timestamp()), updated_at = clock_timestamp()
    WHERE tenant_id = ${k.tenantId} AND key = ${k.key} AND status = 'in_flight'
    RETURNING ${RECORD_COLUMNS}
  `.execute(db);
  return rows[0] ?? null;
}

/**
 * Cancel: complete a run that is in flight, parked or suspended with the
 * operator's response (outcome `canceled`), kept for the run's retention
 * and replayed like any other.
 *
 * Race closed: cancel against the owner's own completion or phase commit.
 * Both update this row under its lock; the owner's writes are fenced on the
 * owner token and `status = 'in_flight'`, which this statement ends, so
 * after a cancel the owner's transaction matches nothing and rolls back.
 * A completion that wins leaves a completed row, which this guard refuses.
 *
 * @returns the updated record, or null when the run is completed (or absent).
 */
export async function cancelRun(
  db: Executor,
  t: Tables,
  k: TenantKey,
  response: StoredResponse,
): Promise<RecordRow | null> {
  // The completion is mark_completed of migration 0014, the statement every completion shares.
  const { rows } = await sql<RecordRow>`/* idempo:cancel */
    SELECT ${RECORD_COLUMNS} FROM ${markCompleted(t, k.tenantId, k.key, "operator", response)}
  `.execute(db);
  return rows[0] ?? null;
}

/**
 * Unpark: make a parked run takeable at once, with a fresh attempt budget
 * (the attempts so far become the floor `maxAttempts` counts from).
 *
 * Race closed: two operators, or unpark against cancel. Only a parked row
 * matches; whoever loses finds another status and changes nothing.
 *
 * @returns the updated record, or null when the run is not parked (or absent).
 */
export async function unparkRun(db: Executor, t: Tables, k: TenantKey): Promise<RecordRow | null> {
  const { rows } = await sql<RecordRow>`/* idempo:unpark */
    UPDATE ${t.runs}
    SET status = 'in_flight', parked_reason = NULL, parked_at = NULL, attempt_floor = attempt,
        locked_until = clock_timestamp(), updated_at = clock_timestamp()
    WHERE tenant_id = ${k.tenantId} AND key = ${k.key} AND status = 'parked'
    RETURNING ${RECORD_COLUMNS}
  `.execute(db);
  return rows[0] ?? null;
}

/** What `rewindRun` saw when it decided, and where it moves the recovery point. */
export interface Rewind {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  /** The attempt number read with the record: any takeover since then bumps it. */
  readonly seenAttempt: number;
  readonly seenRecoveryPoint: string | null;
  /** The item before the one to run again; null to run from the start. */
  readonly recoveryPoint: string | null;
  /** Start a new outbox round: phases that run again derive new delivery keys. */
  readonly resendOutbox: boolean;
}

/**
 * Retry from an item: move the recovery point back so that the item and
 * everything after it run again on the next takeover. State stays as
 * committed, and so do delivered signals (the waits read them again). The
 * wait the run is at is forgotten with its deadline: a rewound timed wait
 * gets a fresh timeout when it runs again. Only for a run no one owns: in flight with an expired lease,
 * parked (which it also unparks, with a fresh attempt budget) or suspended.
 * The lease ends now, so the next retry or resumer takes over at once.
 * With `resendOutbox` the run's outbox round goes up by one, which is what
 * gives the messages of the phases that run again new delivery keys. The
 * branches a parallel item recorded before it committed are forgotten:
 * rewound to or past, it calls every branch again (same derived keys).
 *
 * Race closed: a retry taking the run over between the operator's read and
 * this statement. The guard wants the attempt and recovery point that were
 * read (a takeover bumps the attempt, a commit moves the point) and no live
 * lease; a run that moved on matches nothing and is left as it is.
 *
 * @returns the updated record, or null when the run changed or is owned.
 */
export async function rewindRun(db: Executor, t: Tables, r: Rewind): Promise<RecordRow | null> {
  const { rows } = await sql<RecordRow>`/* idempo:retry_from */
    WITH rewound AS (
      UPDATE ${t.runs}
      SET recovery_point = ${r.recoveryPoint}, status = 'in_flight', owner_token = NULL,
          locked_until = LEAST(locked_until, clock_timestamp()),
          attempt_floor = CASE WHEN status = 'parked' THEN attempt ELSE attempt_floor END,
          outbox_round = outbox_round + ${r.resendOutbox ? 1 : 0},
          parked_reason = NULL, parked_at = NULL, updated_at = clock_timestamp(),
          wait_kind = NULL, wait_name = NULL, wake_at = NULL, wait_until = NULL
      WHERE tenant_id = ${r.tenantId} AND key = ${r.key} AND run_id = ${r.runId}
        AND attempt = ${r.seenAttempt} AND recovery_point IS NOT DISTINCT FROM ${r.seenRecoveryPoint}::text
        AND (status IN ('parked', 'suspended') OR (status = 'in_flight' AND locked_until <= clock_timestamp()))
      RETURNING ${RECORD_COLUMNS}
    ), forgotten_branches AS (
      -- Branches recorded by a parallel item that had not committed: it runs again whole, with the rest.
      UPDATE ${t.history} SET result = NULL
      WHERE tenant_id = ${r.tenantId} AND key = ${r.key} AND run_id = ${r.runId} AND result IS NOT NULL
        AND EXISTS (SELECT 1 FROM rewound)
    )
    SELECT * FROM rewound
  `.execute(db);
  return rows[0] ?? null;
}

/**
 * Forget a key: delete its record and history, so a reuse runs again.
 * Outbox messages already committed stay and are still delivered. Without
 * `force`, a run whose lease is live is refused: deleting it under its
 * owner would let the next call start over and repeat every committed
 * phase and step.
 *
 * Race closed: an operator's delete against a live owner renewing. The
 * liveness test is in the DELETE's own WHERE, evaluated under the row lock
 * against the current lease, not against what the operator read before.
 *
 * @returns the record as it was deleted, or null when nothing was deleted.
 */
export async function deleteRun(db: Executor, t: Tables, k: TenantKey, force: boolean): Promise<RecordRow | null> {
  const { rows } = await sql<RecordRow>`/* idempo:forget */
    WITH gone AS (
      DELETE FROM ${t.runs}
      WHERE tenant_id = ${k.tenantId} AND key = ${k.key}
        AND (${force}::boolean OR NOT (status = 'in_flight' AND locked_until > clock_timestamp()))
      RETURNING ${RECORD_COLUMNS}
    ), forgotten AS (
      DELETE FROM ${t.history} WHERE tenant_id = ${k.tenantId} AND key = ${k.key} AND EXISTS (SELECT 1 FROM gone)
    ), forgotten_signals AS (
      DELETE FROM ${t.signals} WHERE tenant_id = ${k.tenantId} AND key = ${k.key} AND EXISTS (SELECT 1 FROM gone)
    ), forgotten_tombstone AS (
      -- An older run's tombstone past its time (a live one never sits beside a record).
      DELETE FROM ${t.tombstones}
      WHERE tenant_id = ${k.tenantId} AND key_digest = ${t.keyDigest}(${k.key}) AND EXISTS (SELECT 1 FROM gone)
    )
    SELECT * FROM gone
  `.execute(db);
  return rows[0] ?? null;
}
