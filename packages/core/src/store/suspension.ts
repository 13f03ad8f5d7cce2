/**
 * The writes of a run that stops to wait: a sleep commits its wake-up time,
 * a wait for a signal either reads the signal or commits the suspension.
 * Both end the attempt's ownership (no owner, no lease), fenced on the owner
 * token like every write of a run.
 */

import { newId } from "../ids.js";
import { DUE_CHANNEL } from "./notify-channels.js";
import type { Advance } from "./progress.js";
import { advancePastWaitedItem, slotFence } from "./progress.js";
import type { Executor, Ownership, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import { TIMED_OUT } from "./signals.js";
import { sql } from "./sql.js";

export interface SleepCommit {
  readonly name: string;
  readonly attempt: number;
  readonly ms: number;
}

/**
 * Suspend the run at a `.sleep` item: the item becomes the recovery point,
 * the wake-up time is `ms` after now on the database clock, and owner and
 * lease are dropped, so no process holds the run. Workers are notified to
 * look at the next wake-up time again.
 *
 * Race closed: a zombie suspending a run its successor owns. Fenced on the
 * owner token (and a run under a limit on its slot, {@link slotFence}): it
 * matches nothing and learns it lost the lease.
 *
 * @returns the wake-up time, or null when the attempt no longer owns the key.
 */
export async function suspendForSleep(db: Executor, t: Tables, own: Ownership, s: SleepCommit): Promise<Date | null> {
  const { rows } = await sql<{ wake_at: Date }>`/* idempo:sleep */
    WITH slept AS (
      UPDATE ${t.runs}
      SET status = 'suspended', owner_token = NULL, locked_until = NULL, recovery_point = ${s.name},
          wake_at = clock_timestamp() + ${leaseInterval(s.ms)}, wait_kind = 'sleep', wait_name = ${s.name},
          durable = true, updated_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
        AND owner_token = ${own.ownerToken} AND status = 'in_flight' AND ${slotFence(t)}
      RETURNING workflow, wake_at
    ), logged AS (
      INSERT INTO ${t.history} (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at)
      SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${newId()}, 'sleep', ${s.name}, ${s.attempt}, 'started',
             clock_timestamp()
      FROM slept
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM slept
    )
    SELECT wake_at, (SELECT count(*) FROM notified) AS notified FROM slept
  `.execute(db);
  return rows[0]?.wake_at ?? null;
}

/**
 * Lock the run's row for the rest of the transaction, as its owner. The
 * first statement of a wait: `deliverSignal` locks the same row first, so
 * the two serialise and the wait's next statement (a new snapshot in READ
 * COMMITTED) sees every signal committed before it got the lock.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function lockOwnRun(tx: Executor, t: Tables, own: Ownership): Promise<boolean> {
  const { rows } = await sql`/* idempo:wait_lock */
    SELECT 1 FROM ${t.runs}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken} AND status = 'in_flight'
    FOR UPDATE
  `.execute(tx);
  return rows.length === 1;
}

/** A `.waitFor` item's signal and deadline as one read sees them (see {@link readWait}). */
export interface WaitView {
  /** The signal stored for the wait (never the timed-out marker), or null. */
  readonly signal: { readonly payload: string; readonly fingerprint: string } | null;
  /** Without a signal, the wait times out now: the run suspended on it and its `wake_at` has passed. */
  readonly due: boolean;
  /** The same once its signal is discarded: decided on the wait's deadline (`wait_until`), as after a discard. */
  readonly dueAfterDiscard: boolean;
}

/**
 * Read what {@link checkSignalOrSuspend} will decide on, without writing:
 * the wait's stored signal and whether its deadline has passed. Before
 * {@link lockOwnRun} (no lock) it is what the wait's callbacks are run on;
 * after it, in the locked transaction, it tells whether that read still
 * holds (a delivery locks the same row first, so nothing changes it then).
 *
 * @returns null when the attempt no longer owns the key.
 */
export async function readWait(db: Executor, t: Tables, own: Ownership, name: string): Promise<WaitView | null> {
  const { rows } = await sql<{
    payload: string | null;
    fingerprint: string | null;
    due: boolean;
    due_after_discard: boolean;
  }>`/* idempo:wait_read */
    SELECT s.payload::text AS payload, s.fingerprint,
           coalesce(r.wait_kind = 'signal' AND r.wait_name = ${name} AND r.wake_at <= clock_timestamp(), false) AS due,
           coalesce(r.wait_kind = 'signal' AND r.wait_name = ${name} AND r.wait_until <= clock_timestamp(), false)
             AS due_after_discard
    FROM ${t.runs} r
    LEFT JOIN ${t.signals} s
      ON s.tenant_id = r.tenant_id AND s.key = r.key AND s.run_id = ${own.runId} AND s.name = ${name}
        AND s.fingerprint <> ${TIMED_OUT}
    WHERE r.tenant_id = ${own.tenantId} AND r.key = ${own.key} AND r.owner_token = ${own.ownerToken}
      AND r.status = 'in_flight'
  `.execute(db);
  const row = rows[0];
  if (!row) return null;
  const signal = row.payload === null ? null : { payload: row.payload, fingerprint: row.fingerprint ?? "" };
  return { signal, due: row.due === true, dueAfterDiscard: row.due_after_discard === true };
}

export interface WaitCheck {
  readonly name: string;
  readonly attempt: number;
  /** The wait's timeout in ms; null = none. */
  readonly timeoutMs: number | null;
  /** This transaction has just discarded the signal that made the run due: decide on the deadline, not on `wake_at`. */
  readonly afterDiscard?: boolean;
}

/** What a wait found: the signal's payload, its own timeout passed, or that it suspended. */
export type WaitFinding =
  | { readonly kind: "signal"; readonly payload: string; readonly fingerprint: string }
  | { readonly kind: "timed_out" }
  | { readonly kind: "suspended"; readonly wakeAt: Date | null }
  | { readonly kind: "lost" };

interface WaitRow {
  payload: string | null;
  fingerprint: string | null;
  timed_out: boolean | null;
  suspended: boolean;
  wake_at: Date | null;
}

/**
 * At a `.waitFor` item, after {@link lockOwnRun} in the same transaction:
 * read the signal, or find the wait's deadline passed, or else suspend the
 * run on it. The deadline (`wait_until`) is set when the run first suspends
 * on the item and kept when it suspends there again (after a takeover, or
 * after discarding a signal it could not use), so restarts never extend it;
 * `retryFrom` clears it. `wake_at` is the deadline too, unless a signal
 * made the run due earlier: the timeout is decided on `wake_at` (a signal
 * that moved it is there to be read), and after a discarded signal, which
 * moved it, on the deadline. A timed-out wait's history entry is
 * closed here, and the wait is marked timed out in the signals table: a signal that arrives after the
 * timeout was decided (while `onTimeout` runs, or later) is refused instead
 * of being kept and never read.
 *
 * Race closed: the lost wake-up. A signal committed while the run is
 * between "checked for the signal" and "committed suspended" would find
 * the run in flight and not wake it, and the run would then sleep on a
 * signal that already came. Both this transaction and the signal's lock
 * the run's row before they read or write the signal, so one of them goes
 * second and sees the other: a signal first is read here; a suspension
 * first is seen by the signal, which makes the run due.
 */
export async function checkSignalOrSuspend(
  tx: Executor,
  t: Tables,
  own: Ownership,
  w: WaitCheck,
): Promise<WaitFinding> {
  const timeout =
    w.timeoutMs === null ? sql`NULL::timestamptz` : sql`clock_timestamp() + ${leaseInterval(w.timeoutMs)}`;
  // When the wait at the same item times out: wake_at, or the deadline once a discarded signal had moved wake_at.
  const dueAt = w.afterDiscard === true ? sql`wait_until` : sql`wake_at`;
  const { rows } = await sql<WaitRow>`/* idempo:wait */
    WITH sig AS (
      SELECT payload::text AS payload, fingerprint FROM ${t.signals}
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId} AND name = ${w.name}
        AND fingerprint <> ${TIMED_OUT}
    ), fresh AS (
      -- Evaluated once: the deadline and the wake-up time of a first suspension are the same instant.
      SELECT ${timeout} AS deadline
    ), run AS (
      SELECT (wait_kind = 'signal' AND wait_name = ${w.name}) AS same_wait, ${dueAt} AS due_at
      FROM ${t.runs}
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken}
        AND status = 'in_flight'
    ), verdict AS (
      SELECT NOT EXISTS (SELECT 1 FROM sig)
               AND coalesce(run.same_wait AND run.due_at <= clock_timestamp(), false) AS timed_out
      FROM run
    ), suspended AS (
      UPDATE ${t.runs}
      SET status = 'suspended', owner_token = NULL, locked_until = NULL, durable = true,
          wait_until = CASE WHEN wait_kind = 'signal' AND wait_name = ${w.name} THEN wait_until
                            ELSE (SELECT deadline FROM fresh) END,
          wake_at = CASE WHEN wait_kind = 'signal' AND wait_name = ${w.name} THEN ${dueAt}
                         ELSE (SELECT deadline FROM fresh) END,
          wait_kind = 'signal', wait_name = ${w.name}, updated_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
        AND owner_token = ${own.ownerToken} AND status = 'in_flight'
        AND NOT EXISTS (SELECT 1 FROM sig) AND NOT (SELECT timed_out FROM verdict)
      RETURNING wake_at
    ), waiting_again AS (
      -- A wait that runs again (retryFrom) accepts a signal again.
      DELETE FROM ${t.signals}
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId} AND name = ${w.name}
        AND fingerprint = ${TIMED_OUT} AND EXISTS (SELECT 1 FROM suspended)
    ), closed_to_signals AS (
      -- The timeout is decided: a signal that comes later is refused, not kept unread.
      INSERT INTO ${t.signals} (tenant_id, key, run_id, name, payload, fingerprint)
      SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${w.name}, 'null'::json, ${TIMED_OUT}
      FROM verdict WHERE verdict.timed_out
      ON CONFLICT DO NOTHING
    ), logged AS (
      INSERT INTO ${t.history} (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at)
      SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${newId()}, 'wait', ${w.name}, ${w.attempt}, 'started',
             clock_timestamp()
      FROM suspended
      WHERE NOT EXISTS (
        SELECT 1 FROM ${t.history}
        WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
          AND kind = 'wait' AND name = ${w.name} AND outcome = 'started'
      )
    ), expired AS (
      UPDATE ${t.history} SET outcome = 'failed', error = 'wait_timeout: no signal before the timeout',
             finished_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
        AND kind = 'wait' AND name = ${w.name} AND outcome = 'started' AND (SELECT timed_out FROM verdict)
    )
    SELECT (SELECT payload FROM sig) AS payload, (SELECT fingerprint FROM sig) AS fingerprint,
           (SELECT timed_out FROM verdict) AS timed_out,
           EXISTS (SELECT 1 FROM suspended) AS suspended, (SELECT wake_at FROM suspended) AS wake_at
  `.execute(tx);
  const row = rows[0];
  if (!row || row.timed_out === null) return { kind: "lost" };
  if (row.suspended === true) return { kind: "suspended", wakeAt: row.wake_at };
  if (row.payload !== null) return { kind: "signal", payload: row.payload, fingerprint: row.fingerprint ?? "" };
  if (row.timed_out === true) return { kind: "timed_out" };
  return { kind: "lost" };
}

/**
 * Move past a `.waitFor` item: the item becomes the recovery point, state
 * holds the payload (or `onTimeout`'s value) under its name, the lease is
 * extended, or the run completes when it was the last item. The item's
 * history entry is closed (or written, when the signal was there before the
 * run arrived). Fenced like every write.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function advancePastWait(tx: Executor, t: Tables, own: Ownership, adv: Advance): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:wait_result */
    WITH ${advancePastWaitedItem(t, own, "wait", adv)}, logged AS (
      INSERT INTO ${t.history} (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at, finished_at)
      SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${newId()}, 'wait', ${adv.name}, ${adv.attempt},
             'succeeded', clock_timestamp(), clock_timestamp()
      FROM advanced
      WHERE NOT EXISTS (SELECT 1 FROM closed)
        AND NOT EXISTS (
          SELECT 1 FROM ${t.history}
          WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
            AND kind = 'wait' AND name = ${adv.name}
        )
    )
    SELECT (SELECT count(*) FROM advanced)::int AS n
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}
