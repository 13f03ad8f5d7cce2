/**
 * Rate limits (migration 0018): one token bucket per limit name, shared by
 * every process on the database and refilled on the database clock. A step
 * takes a token (or reserves one due soon) in one statement and waits for
 * it without holding a connection; a token due later than the step can
 * wait suspends the run until then.
 */

import { DUE_CHANNEL } from "./notify-channels.js";
import type { Executor, Ownership, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import { sql } from "./sql.js";

/** A bucket: its refill rate and size. */
export interface Bucket {
  readonly name: string;
  /** Tokens earned per ms. */
  readonly perMs: number;
  /** Most tokens stored (the bucket starts full). */
  readonly burst: number;
}

/** A token taken, due in `waitMs` (0: now); or none taken, one being due in `waitMs`. */
export interface TokenAnswer {
  readonly taken: boolean;
  readonly waitMs: number;
}

/**
 * Take one token of `bucket`: one due within `maxWaitMs` (null: any time)
 * is taken, and reserved when it is not there yet, so the caller sleeps
 * `waitMs` and goes without asking again; one due later is left alone.
 *
 * Race closed: callers in many processes taking the last token. The bucket's
 * row is locked before it is read, so each taker refills and takes from
 * what the previous one left, and no token is taken twice; a reservation
 * makes the tokens negative, so the next caller's token is due after it.
 */
export async function takeRateToken(
  db: Executor,
  t: Tables,
  bucket: Bucket,
  maxWaitMs: number | null,
): Promise<TokenAnswer> {
  // The statement is the function take_rate_token of migration 0018.
  const rows = await t.calls.call<{ taken: boolean; wait_ms: number }>(db, "take_rate_token", [
    bucket.name,
    bucket.perMs,
    bucket.burst,
    maxWaitMs,
  ]);
  const row = rows[0];
  return { taken: row?.taken === true, waitMs: row?.wait_ms ?? 0 };
}

/**
 * Suspend the run before a step whose token is due in `ms`: no owner, no
 * lease, due `ms` from now (database clock), the recovery point unchanged,
 * so a worker or a retry runs the step again then. What the run waited at
 * before (a sleep it woke from) is over. Workers are told to look at the
 * next wake-up time again.
 *
 * Race closed: a zombie suspending a run its successor owns. Fenced on the
 * owner token: it matches nothing and learns it lost the lease.
 *
 * @returns the wake-up time, or null when the attempt no longer owns the key.
 */
export async function suspendForToken(db: Executor, t: Tables, own: Ownership, ms: number): Promise<Date | null> {
  const { rows } = await sql<{ wake_at: Date }>`/* idempo:rate_limited */
    WITH suspended AS (
      UPDATE ${t.runs}
      SET status = 'suspended', owner_token = NULL, locked_until = NULL, durable = true,
          wake_at = clock_timestamp() + ${leaseInterval(ms)}, wait_kind = NULL, wait_name = NULL,
          updated_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
        AND owner_token = ${own.ownerToken} AND status = 'in_flight'
      RETURNING workflow, wake_at
    ), notified AS (
      SELECT pg_notify(${DUE_CHANNEL}, workflow) FROM suspended
    )
    SELECT wake_at, (SELECT count(*) FROM notified) AS notified FROM suspended
  `.execute(db);
  return rows[0]?.wake_at ?? null;
}
