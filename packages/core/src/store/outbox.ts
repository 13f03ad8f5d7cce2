/**
 * Outbox statements: enqueue inside a phase's transaction, and the relay's
 * claim / deliver / retry / dead-letter transitions. A relay fences its
 * writes on the row's attempt count, the token it took with its claim.
 */

import { storableText } from "./progress.js";
import type { Executor, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import type { Sql } from "./sql.js";
import { sql } from "./sql.js";

/** The channel a phase commit notifies so relays wake at once. */
export const OUTBOX_CHANNEL = "idempo_outbox";

export interface OutboxInsert {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  /** The run attempt whose phase enqueues it: part of the unique constraint, not of the key. */
  readonly runAttempt: number;
  readonly messageId: string;
  readonly topic: string;
  /** JSON text. */
  readonly payload: string;
  /** The application's own key, or `derived`: the round-0 derived key, which the run's outbox round may replace. */
  readonly deliveryKey: { readonly derived: string } | { readonly explicit: string };
}

/** What an insert did: the key the message carries, and whether a row was written. */
export interface OutboxInserted {
  readonly deliveryKey: string;
  /**
   * false: a derived key whose row this attempt already committed (a phase
   * run again at the same attempt), or an explicit key another run holds.
   */
  readonly inserted: boolean;
}

/**
 * The delivery key of outbox round `round` (> 0), from the round-0 key:
 * `dlv_` + base64url(SHA-256(round-0 key, ":", round)). In SQL because the
 * round lives in the run's row, which the insert reads anyway.
 */
function resentKeySql(derived: string) {
  return sql`'dlv_' || translate(rtrim(encode(sha256(convert_to(${derived} || ':' || r.outbox_round, 'UTF8')), 'base64'), '='), '+/', '-_')`;
}

/**
 * Insert a message in the phase's transaction and queue a notification,
 * which PostgreSQL delivers only when (and if) that transaction commits.
 * The run's row gives the outbox round in the same statement (a primary
 * key read, no lock).
 *
 * Races closed: (1) a successor against a paused zombie of the same run,
 * both inserting one message under one key: the unique constraint carries
 * the attempt, so neither insert waits on the other's uncommitted row, and
 * only the attempt whose phase commit holds the fence keeps its row. (2) A
 * phase run again at the attempt that already committed it: `ON CONFLICT DO
 * NOTHING` keeps the committed row. An explicit key another run used is
 * refused (`inserted: false`), whatever the attempts; a concurrent one of
 * the same attempt number raises the unique violation (23505).
 */
export async function insertMessage(tx: Executor, t: Tables, m: OutboxInsert): Promise<OutboxInserted | null> {
  const given = m.deliveryKey;
  const derived = "derived" in given ? given.derived : null;
  const chosen =
    "derived" in given
      ? sql`CASE WHEN r.outbox_round = 0 THEN ${given.derived}::text ELSE ${resentKeySql(given.derived)} END`
      : sql`${given.explicit}::text`;
  // Plain lower-case aliases: the phase's transaction may carry the application's plugins (CamelCasePlugin).
  const { rows } = await sql<{ dk: string; n: number }>`
    WITH chosen AS (
      SELECT ${chosen} AS dk FROM ${t.runs} r WHERE r.tenant_id = ${m.tenantId} AND r.key = ${m.key}
    ), queued AS (
      INSERT INTO ${t.outbox} (tenant_id, message_id, key, run_id, run_attempt, topic, payload, delivery_key)
      SELECT ${m.tenantId}, ${m.messageId}, ${m.key}, ${m.runId}, ${m.runAttempt}, ${m.topic}, ${m.payload}::json, c.dk
      FROM chosen c
      ${
        derived === null
          ? sql`WHERE NOT EXISTS (
              SELECT 1 FROM ${t.outbox} o WHERE o.tenant_id = ${m.tenantId} AND o.delivery_key = c.dk AND o.run_id <> ${m.runId}
            )`
          : sql`ON CONFLICT (tenant_id, delivery_key, run_attempt) DO NOTHING`
      }
      RETURNING topic
    )
    SELECT c.dk, (SELECT count(*)::int FROM (SELECT pg_notify(${OUTBOX_CHANNEL}, topic) FROM queued) q) AS n
    FROM chosen c
  `.execute(tx);
  const row = rows[0];
  // No run row: the key was deleted under the attempt (a forced forget).
  return row ? { deliveryKey: row.dk, inserted: row.n === 1 } : null;
}

export interface ClaimedMessage {
  tenant_id: string;
  message_id: string;
  key: string;
  topic: string;
  payload: string;
  delivery_key: string;
  attempts: number;
  created_at: Date;
}

/**
 * Claim up to `limit` due messages for delivery.
 *
 * Race closed: two relays over the same rows. `FOR UPDATE SKIP LOCKED`
 * hands each row to one claimer; the claim then holds it with a lease, so
 * no other relay delivers it until the lease runs out (a killed relay's
 * messages come back after it, with the same delivery key).
 * Due rows are read in order from `outbox_pending_available_at`; the
 * comparison is with `now()` so the planner can make it an index condition.
 */
export async function claimDue(
  db: Executor,
  t: Tables,
  topics: readonly string[],
  limit: number,
  leaseMs: number,
): Promise<ClaimedMessage[]> {
  const { rows } = await sql<ClaimedMessage>`
    WITH due AS (
      SELECT tenant_id, message_id FROM ${t.outbox}
      WHERE status = 'pending' AND available_at <= now()
        AND (locked_until IS NULL OR locked_until <= now())
        AND topic = ANY(${sql.val(topics)}::text[])
      ORDER BY available_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${t.outbox} o
    SET locked_until = clock_timestamp() + ${leaseInterval(leaseMs)}, attempts = o.attempts + 1
    FROM due
    WHERE o.tenant_id = due.tenant_id AND o.message_id = due.message_id
    RETURNING o.tenant_id, o.message_id, o.key, o.topic, o.payload::text AS payload, o.delivery_key, o.attempts,
              o.created_at
  `.execute(db);
  return rows;
}

/**
 * The guard of a relay's write after a delivery: the message is still
 * pending under this relay's claim. Race closed: a relay whose lease ran
 * out while it delivered, the message claimed again by another relay (which
 * counted one more attempt); its late write matches nothing.
 */
function stillClaimed(m: ClaimedMessage): Sql {
  return sql`tenant_id = ${m.tenant_id} AND message_id = ${m.message_id}
      AND attempts = ${m.attempts} AND status = 'pending'`;
}

/** Mark delivered, only if this relay's claim (its attempt number) still holds. */
export async function markDelivered(db: Executor, t: Tables, m: ClaimedMessage): Promise<boolean> {
  return sql`
    UPDATE ${t.outbox} SET status = 'delivered', delivered_at = clock_timestamp(), locked_until = NULL, last_error = NULL
    WHERE ${stillClaimed(m)}
    RETURNING 1
  `.wroteOne(db);
}

/** Record a failed attempt: retry after `retryInMs`, or dead-letter when `dead`. */
export async function markFailed(
  db: Executor,
  t: Tables,
  m: ClaimedMessage,
  error: string,
  dead: boolean,
  retryInMs: number,
): Promise<void> {
  await sql`
    UPDATE ${t.outbox}
    SET status = ${dead ? "dead" : "pending"}, locked_until = NULL, last_error = ${storableText(error)},
        available_at = clock_timestamp() + ${leaseInterval(retryInMs)}
    WHERE ${stillClaimed(m)}
  `.execute(db);
}
