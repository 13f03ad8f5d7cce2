/**
 * Canceling child runs whose parent ended before them: `cancelChildren`
 * right after a parent's cancel or timeout commits, and the sweeper's
 * repair, `cancelOrphanedChildren`, for a crash between the two. Each
 * cancel completes the child as `mark_completed` does for an operator's
 * cancel (outcome `canceled`); its completion trigger (migration 0020)
 * then finds the parent no longer waiting.
 *
 * The cancel locks children in key order while a completing child holds
 * its own row and locks its parent's, then a queued sibling's (the
 * trigger): the two orders can meet in a deadlock, which PostgreSQL ends
 * by rolling one of them back. Whichever it is, running it again is safe
 * (a rolled-back cancel changed nothing; a rolled-back completion is
 * retried by its runner and then finds itself canceled), so
 * `cancelChildren` runs its statement again, a bounded number of times.
 */
import { isTransient } from "../database/transient-failures.js";
import { DONE_CHANNEL } from "./notify-channels.js";
import type { Executor, StoredResponse, Tables } from "./run-store.js";
import { sql } from "./sql.js";

/**
 * What a child that has not completed stores when its parent ends first
 * (canceled, or its wait timed out): outcome `canceled`, a 409 RFC 9457
 * problem with code `run_canceled`, as `engine.cancel` stores by default.
 */
export const PARENT_ENDED: StoredResponse = Object.freeze({
  outcome: "canceled",
  status: 409,
  body: JSON.stringify({
    type: "about:blank",
    title: "Canceled",
    status: 409,
    code: "run_canceled",
    detail: "the parent run ended before this child completed",
  }),
});

/**
 * The completion written to each orphaned child the sweeper cancels: what
 * `mark_completed` writes for a cancel (and `cancel_children` of migration
 * 0024 for a parent's children), in one UPDATE over all of them, so every
 * child row is locked (in key order) before any completion trigger locks
 * the parent's.
 */
function cancelAll(t: Tables, doomed: ReturnType<typeof sql>, response: StoredResponse) {
  return sql`
    canceled AS (
      UPDATE ${t.runs} r
      SET status = 'completed', owner_token = NULL, locked_until = NULL, parked_reason = NULL, parked_at = NULL,
          outcome = ${response.outcome}, response_status = ${response.status}::integer,
          response_body = ${response.body}::json,
          expires_at = clock_timestamp() + r.retention_ms * interval '1 millisecond',
          completed_at = clock_timestamp(), updated_at = clock_timestamp()
      FROM (${doomed}) d
      WHERE r.tenant_id = d.tenant_id AND r.key = d.key AND r.status <> 'completed'
      RETURNING r.tenant_id, r.key, r.durable
    ), told AS (
      SELECT pg_notify(${DONE_CHANNEL}, ${sql.id(t.schema, "completion_tag")}(tenant_id, key)) FROM canceled WHERE durable
    )
    SELECT (SELECT count(*) FROM canceled)::int AS n, (SELECT count(*) FROM told) AS told`;
}

/** How many times `cancelChildren` runs its statement when PostgreSQL rolls it back (deadlock, serialization). */
const CANCEL_TRIES = 5;

/**
 * Cancel the children of the parent `(tenantId, key, runId)` that have not
 * completed (of every item, and their own children, at any depth), with
 * `response` (outcome `canceled`). In flight ones lose their owner as by
 * `engine.cancel`: their next write is refused. The children, theirs in
 * turn, and so on: a canceled child's own children have no one left to
 * wait for them. Every child row is locked, in key order, before any
 * completion trigger locks its parent's.
 *
 * A deadlock or serialization failure rolls the statement back whole; it
 * is run again, up to {@link CANCEL_TRIES} times in all, before the error
 * is raised.
 *
 * @returns how many were canceled.
 */
export async function cancelChildren(
  db: Executor,
  t: Tables,
  parent: { readonly tenantId: string; readonly key: string; readonly runId: string },
  response: StoredResponse,
): Promise<number> {
  // The statement is the function cancel_children of migration 0024, which the SQL interface's cancel() calls too.
  const statement = sql<{ n: number }>`/* idempo:cancel_children */
    SELECT ${sql.id(t.schema, "cancel_children")}(${parent.tenantId}, ${parent.key}, ${parent.runId},
      ${response.outcome}, ${response.status}::integer, ${response.body}::json) AS n
  `;
  for (let tries = 1; ; tries++) {
    try {
      const { rows } = await statement.execute(db);
      return rows[0]?.n ?? 0;
    } catch (error) {
      if (tries >= CANCEL_TRIES || !isTransient(error)) throw error;
    }
  }
}

/**
 * The sweeper's repair: cancel at most `limit` children that have not
 * completed while their parent has (a crash between the parent's end and
 * its `cancelChildren`) or is gone.
 *
 * @returns how many were canceled.
 */
export async function cancelOrphanedChildren(
  db: Executor,
  t: Tables,
  limit: number,
  response: StoredResponse,
): Promise<number> {
  const doomed = sql`SELECT c.tenant_id, c.key FROM ${t.runs} c
    WHERE c.parent_key IS NOT NULL AND c.status <> 'completed'
      AND NOT EXISTS (
        SELECT 1 FROM ${t.runs} p
        WHERE p.tenant_id = c.tenant_id AND p.key = c.parent_key AND p.run_id = c.parent_run_id
          AND p.status <> 'completed'
      )
    ORDER BY c.key LIMIT ${limit} FOR UPDATE OF c SKIP LOCKED`;
  const { rows } = await sql<{ n: number }>`/* idempo:cancel_orphans */
    WITH ${cancelAll(t, doomed, response)}
  `.execute(db);
  return rows[0]?.n ?? 0;
}
