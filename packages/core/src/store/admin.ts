/**
 * Operator statements behind the CLI: count records, list and retry outbox
 * messages, show pending migrations. None is on the hot path.
 */

import type { Executor, RunStatus, Tables } from "./run-store.js";
import { sql } from "./sql.js";

export interface StatsRow {
  workflow: string;
  status: RunStatus;
  records: number;
  stuck: number;
  expired: number;
  oldest_created_at: Date | null;
}

/**
 * Counts per workflow and status. The totals count every record, so they
 * read the whole table whatever the plan (an operator command, not a loop);
 * the stuck and expired counts come from the partial lease and expiry
 * indexes and grow only with the rows they count.
 */
export async function selectStats(db: Executor, t: Tables): Promise<StatsRow[]> {
  const { rows } = await sql<StatsRow>`
    WITH totals AS (
      SELECT workflow, status, count(*)::int AS records, min(created_at) AS oldest_created_at
      FROM ${t.runs}
      GROUP BY workflow, status
    ), stuck AS (
      SELECT workflow, 'in_flight'::text AS status, count(*)::int AS n FROM ${t.runs}
      WHERE status = 'in_flight' AND locked_until <= now()
      GROUP BY workflow
    ), expired AS (
      SELECT workflow, 'completed'::text AS status, count(*)::int AS n FROM ${t.runs}
      WHERE status = 'completed' AND expires_at <= now()
      GROUP BY workflow
    )
    SELECT a.workflow, a.status, a.records, coalesce(s.n, 0) AS stuck, coalesce(e.n, 0) AS expired,
           a.oldest_created_at
    FROM totals a
    LEFT JOIN stuck s ON s.workflow = a.workflow AND s.status = a.status
    LEFT JOIN expired e ON e.workflow = a.workflow AND e.status = a.status
    ORDER BY a.workflow, a.status
  `.execute(db);
  return rows;
}

export interface OutboxRow {
  tenant_id: string;
  message_id: string;
  key: string;
  topic: string;
  delivery_key: string;
  status: "pending" | "delivered" | "dead";
  attempts: number;
  available_at: Date;
  last_error: string | null;
  created_at: Date;
  delivered_at: Date | null;
}

export async function selectOutbox(
  db: Executor,
  t: Tables,
  f: { tenantId: string | undefined; status: string | undefined; topic: string | undefined; limit: number },
): Promise<OutboxRow[]> {
  const conditions = [sql`true`];
  if (f.tenantId !== undefined) conditions.push(sql`tenant_id = ${f.tenantId}`);
  if (f.status !== undefined) conditions.push(sql`status = ${f.status}`);
  if (f.topic !== undefined) conditions.push(sql`topic = ${f.topic}`);
  const { rows } = await sql<OutboxRow>`
    SELECT tenant_id, message_id, key, topic, delivery_key, status, attempts, available_at, last_error, created_at,
           delivered_at
    FROM ${t.outbox}
    WHERE ${sql.join(conditions, sql` AND `)}
    ORDER BY created_at DESC, message_id DESC
    LIMIT ${f.limit}
  `.execute(db);
  return rows;
}

/** Put a dead (or failing) message back in line now, with a fresh attempt budget. */
export async function requeueMessage(db: Executor, t: Tables, tenantId: string, messageId: string): Promise<boolean> {
  const { rows } = await sql`
    UPDATE ${t.outbox} SET status = 'pending', attempts = 0, available_at = clock_timestamp(), locked_until = NULL
    WHERE tenant_id = ${tenantId} AND message_id = ${messageId} AND status IN ('pending', 'dead')
    RETURNING 1
  `.execute(db);
  return rows.length === 1;
}
