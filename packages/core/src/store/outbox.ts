/**
 * Outbox statements: enqueue inside a phase's transaction, and the relay's
 * claim / deliver / retry / dead-letter transitions. A relay fences its
 * writes on the row's attempt count, the token it took with its claim.
 */
import { sql } from "kysely";
import { storableText } from "./progress.js";
import type { Executor, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";

/** The channel a phase commit notifies so relays wake at once. */
export const OUTBOX_CHANNEL = "idempo_outbox";

export interface OutboxInsert {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly messageId: string;
  readonly topic: string;
  /** JSON text. */
  readonly payload: string;
  readonly deliveryKey: string;
}

/**
 * Insert a message in the phase's transaction and queue a notification,
 * which PostgreSQL delivers only when (and if) that transaction commits.
 */
export async function insertMessage(tx: Executor, t: Tables, m: OutboxInsert): Promise<void> {
  await sql`
    WITH queued AS (
      INSERT INTO ${t.outbox} (tenant_id, message_id, key, run_id, topic, payload, delivery_key)
      VALUES (${m.tenantId}, ${m.messageId}, ${m.key}, ${m.runId}, ${m.topic}, ${m.payload}::json, ${m.deliveryKey})
      RETURNING topic
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, topic) FROM queued
  `.execute(tx);
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

/** Mark delivered, only if this relay's claim (its attempt number) still holds. */
export async function markDelivered(db: Executor, t: Tables, m: ClaimedMessage): Promise<boolean> {
  const { rows } = await sql`
    UPDATE ${t.outbox} SET status = 'delivered', delivered_at = clock_timestamp(), locked_until = NULL, last_error = NULL
    WHERE tenant_id = ${m.tenant_id} AND message_id = ${m.message_id} AND attempts = ${m.attempts} AND status = 'pending'
    RETURNING 1
  `.execute(db);
  return rows.length === 1;
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
    WHERE tenant_id = ${m.tenant_id} AND message_id = ${m.message_id} AND attempts = ${m.attempts} AND status = 'pending'
  `.execute(db);
}
