/**
 * The writes of child runs, which a `.child` or `.map` item starts. A
 * child is created with the item's start (`startChildren`), due at once or,
 * past its map's `concurrency`, queued (suspended, no wake-up time); the
 * parent then suspends on them (`suspendForChildren`) holding no owner and
 * no lease. The trigger `runs_child_completed` (migration 0020) moves the
 * rest along in each child's completing transaction: queued → due for the
 * next sibling, and the parent due once the last child completed. The
 * parent, taken again, reads their responses (`childrenOf`) and moves past
 * the item (`advancePastChildren`). A parent that ends otherwise (canceled,
 * timed out) cancels its children that have not completed
 * (`cancelChildren` of child-cancel.ts), and the sweeper repairs a crash
 * in between. Every write of the parent is fenced on its owner token.
 */
import { newId } from "../ids.js";
import { DUE_CHANNEL } from "./notify-channels.js";
import type { Advance } from "./progress.js";
import { advancePastWaitedItem, markCompleted, slotFence } from "./progress.js";
import type { Executor, Ownership, RunOutcome, RunStatus, StoredResponse, Tables } from "./run-store.js";
import { leaseInterval } from "./run-store.js";
import { sql } from "./sql.js";

/** The parent run and item whose children are meant. */
export interface ParentItem {
  readonly tenantId: string;
  readonly key: string;
  readonly runId: string;
  readonly item: string;
}

/** One child as the parent reads it. */
export interface ChildRow {
  readonly key: string;
  readonly index: number;
  readonly status: RunStatus;
  readonly outcome: RunOutcome | null;
  readonly responseStatus: number | null;
  /** The stored response body as JSON text; null until completed. */
  readonly responseBody: string | null;
}

/** One child to create: its key, run id and request. */
interface NewChild {
  readonly key: string;
  readonly runId: string;
  readonly fingerprint: string;
  /** The input as JSON text. */
  readonly input: string;
  readonly parsedInputHash: string | null;
}

/** The children of one item, with what they share (their workflow's definition and retention). */
export interface ChildrenStart {
  readonly kind: "child" | "map";
  readonly attempt: number;
  readonly workflow: string;
  readonly outline: readonly string[];
  readonly definitionHash: string;
  readonly workflowVersion: number;
  readonly retentionMs: number;
  readonly tombstoneMs: number;
  /** The child workflow's `.priority`, stored as `enqueue` stores it (null: none set). */
  readonly priority: number | null;
  /** How many of them are due at once (by index); the others are queued. */
  readonly runnable: number;
  readonly children: readonly NewChild[];
}

/**
 * Lock the parent's row as its owner, the first statement of the item's
 * transaction (see the trigger for the race it closes), and say whether
 * the wait on this item's children is past its deadline.
 *
 * @returns null when the attempt no longer owns the key.
 */
export async function lockForChildren(
  tx: Executor,
  t: Tables,
  own: Ownership,
  item: string,
): Promise<{ timedOut: boolean } | null> {
  const { rows } = await sql<{ timed_out: boolean }>`/* idempo:children_lock */
    SELECT coalesce(wait_kind = 'children' AND wait_name = ${item} AND wait_until <= clock_timestamp(), false)
             AS timed_out
    FROM ${t.runs}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken} AND status = 'in_flight'
    FOR UPDATE
  `.execute(tx);
  const row = rows[0];
  return row ? { timedOut: row.timed_out } : null;
}

/** The children of a parent's item, in input order. */
export async function childrenOf(db: Executor, t: Tables, p: ParentItem): Promise<ChildRow[]> {
  const { rows } = await sql<{
    key: string;
    child_index: number;
    status: RunStatus;
    outcome: RunOutcome | null;
    response_status: number | null;
    response_body: string | null;
  }>`/* idempo:children */
    SELECT key, child_index, status, outcome, response_status, response_body::text AS response_body FROM ${t.runs}
    WHERE tenant_id = ${p.tenantId} AND parent_key = ${p.key} AND parent_item = ${p.item}
      AND parent_run_id = ${p.runId}
    ORDER BY child_index
  `.execute(db);
  return rows.map((r) => ({
    key: r.key,
    index: r.child_index,
    status: r.status,
    outcome: r.outcome,
    responseStatus: r.response_status,
    responseBody: r.response_body,
  }));
}

/**
 * Create the item's children, in the transaction that records the item's
 * start (its history entry), after {@link lockForChildren}: each one
 * suspended with attempt 0 and no owner like an enqueued run, due at once
 * when its index is below `runnable`, else queued. Workers are notified on
 * commit.
 *
 * Race closed: the crash between "children created" and "parent
 * suspended": both commit in this transaction or neither does, and a
 * later attempt derives the same keys; a key already taken is left as it
 * is (`ON CONFLICT DO NOTHING`), so no child is ever created twice.
 */
export async function startChildren(
  tx: Executor,
  t: Tables,
  own: Ownership,
  item: string,
  s: ChildrenStart,
): Promise<void> {
  const c = s.children;
  await dropEarlierChildren(
    tx,
    t,
    own,
    c.map((x) => x.key),
  );
  await sql`/* idempo:start_children */
    WITH made AS (
      INSERT INTO ${t.runs} (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint, input,
                             parsed_input_hash, status, owner_token, locked_until, attempt, retention_ms,
                             tombstone_ms, wake_at, wait_kind, wait_name, durable, workflow_version, parent_key,
                             parent_run_id, parent_item, child_index, priority)
      SELECT ${own.tenantId}, n.key, n.run_id, ${s.workflow}, ${JSON.stringify(s.outline)}::json,
             ${s.definitionHash}, n.fingerprint, n.input::json, n.parsed_input_hash, 'suspended', NULL, NULL, 0,
             ${s.retentionMs}, ${s.tombstoneMs},
             CASE WHEN n.idx - 1 < ${s.runnable} THEN clock_timestamp() END,
             CASE WHEN n.idx - 1 < ${s.runnable} THEN NULL ELSE 'queued' END,
             CASE WHEN n.idx - 1 < ${s.runnable} THEN NULL ELSE ${item} END,
             true, ${s.workflowVersion}, ${own.key}, ${own.runId}, ${item}, (n.idx - 1)::int,
             ${s.priority}::int
      FROM unnest(${sql.val(c.map((x) => x.key))}::text[], ${sql.val(c.map((x) => x.runId))}::text[],
                  ${sql.val(c.map((x) => x.fingerprint))}::text[], ${sql.val(c.map((x) => x.input))}::text[],
                  ${sql.val(c.map((x) => x.parsedInputHash))}::text[])
           WITH ORDINALITY AS n (key, run_id, fingerprint, input, parsed_input_hash, idx)
      ON CONFLICT (tenant_id, key) DO NOTHING
      RETURNING 1
    ), logged AS (
      INSERT INTO ${t.history} (tenant_id, key, run_id, entry_id, kind, name, attempt, outcome, started_at)
      SELECT ${own.tenantId}, ${own.key}, ${own.runId}, ${newId()}, ${s.kind}, ${item}, ${s.attempt}, 'started',
             clock_timestamp()
      WHERE NOT EXISTS (
        SELECT 1 FROM ${t.history}
        WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
          AND kind = ${s.kind} AND name = ${item} AND outcome = 'started'
      )
    )
    SELECT pg_notify(${DUE_CHANNEL}, ${s.workflow}) WHERE EXISTS (SELECT 1 FROM made)
  `.execute(tx);
}

/**
 * Before an item creates its children: delete the completed children of an
 * earlier run of the same parent key (a key reused after its retention
 * while a child's record was still kept) under the keys about to be
 * derived again, with their history and signals, so the new run's
 * children can take the keys. Anything else under such a key stays, and
 * the item finds fewer children than it made.
 */
async function dropEarlierChildren(tx: Executor, t: Tables, own: Ownership, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await sql`/* idempo:drop_earlier_children */
    WITH gone AS (
      DELETE FROM ${t.runs}
      WHERE tenant_id = ${own.tenantId} AND key = ANY(${sql.val(keys)}::text[]) AND parent_key = ${own.key}
        AND parent_run_id <> ${own.runId} AND status = 'completed'
      RETURNING tenant_id, key, run_id
    ), forgotten AS (
      DELETE FROM ${t.history} h USING gone g
      WHERE h.tenant_id = g.tenant_id AND h.key = g.key AND h.run_id = g.run_id
    )
    DELETE FROM ${t.signals} s USING gone g
    WHERE s.tenant_id = g.tenant_id AND s.key = g.key AND s.run_id = g.run_id
  `.execute(tx);
}

/**
 * Suspend the parent on its item's children, after {@link lockForChildren}
 * in the same transaction: no owner, no lease, due at the wait's deadline
 * (set when it first suspends on the item and kept after, so restarts
 * never extend it; none without `timeoutMs`) or when the last child's
 * completion makes it due. The recovery point stays before the item, which
 * runs again when the parent is taken. Fenced by the owner token and the
 * slot ({@link slotFence}): a refusal rolls the new children back with it.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function suspendForChildren(
  tx: Executor,
  t: Tables,
  own: Ownership,
  wait: { readonly item: string; readonly timeoutMs: number | null },
): Promise<boolean> {
  const deadline =
    wait.timeoutMs === null ? sql`NULL::timestamptz` : sql`clock_timestamp() + ${leaseInterval(wait.timeoutMs)}`;
  return sql`/* idempo:children_wait */
    UPDATE ${t.runs}
    SET status = 'suspended', owner_token = NULL, locked_until = NULL, durable = true,
        wait_until = CASE WHEN wait_kind = 'children' AND wait_name = ${wait.item} THEN wait_until ELSE ${deadline} END,
        wake_at = CASE WHEN wait_kind = 'children' AND wait_name = ${wait.item} THEN wait_until ELSE ${deadline} END,
        wait_kind = 'children', wait_name = ${wait.item}, updated_at = clock_timestamp()
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken} AND status = 'in_flight'
      AND ${slotFence(t)}
    RETURNING 1
  `.wroteOne(tx);
}

/**
 * Move past a `.child` or `.map` item once every child completed: the item
 * becomes the recovery point with the children's results in state, the
 * wait is cleared and the lease extended (or the run completes when the
 * item is its last), and the item's history entry is closed, in one fenced
 * statement.
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function advancePastChildren(
  tx: Executor,
  t: Tables,
  own: Ownership,
  kind: "child" | "map",
  adv: Advance,
): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:children_result */
    WITH ${advancePastWaitedItem(t, own, kind, adv)}
    SELECT (SELECT count(*) FROM advanced)::int AS n
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}

/**
 * The wait on an item's children passed its deadline: close the item's
 * history entry as failed and complete the parent with `response`, fenced.
 * Its children are canceled after this commits ({@link cancelChildren}),
 * never under the parent's row lock (a child completing locks its own row,
 * then the parent's: the other order would deadlock with it).
 *
 * @returns false when the attempt no longer owns the key.
 */
export async function failChildrenTimeout(
  tx: Executor,
  t: Tables,
  own: Ownership,
  kind: "child" | "map",
  item: string,
  response: StoredResponse,
): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`/* idempo:children_timeout */
    WITH done AS (
      SELECT tenant_id FROM ${markCompleted(t, own.tenantId, own.key, own, response)}
    ), closed AS (
      UPDATE ${t.history} SET outcome = 'failed', error = 'children_timeout: the children did not complete in time',
             finished_at = clock_timestamp()
      WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND run_id = ${own.runId}
        AND kind = ${kind} AND name = ${item} AND outcome = 'started' AND EXISTS (SELECT 1 FROM done)
    )
    SELECT (SELECT count(*) FROM done)::int AS n
  `.execute(tx);
  return (rows[0]?.n ?? 0) === 1;
}

/** One child run of a run, as `inspect` shows it. */
export interface ChildLink {
  readonly key: string;
  /** The `.child` or `.map` item that started it, and its index in the item's inputs. */
  readonly item: string;
  readonly index: number;
  readonly workflow: string;
  readonly status: RunStatus;
  /** How it ended; null until completed. */
  readonly outcome: RunOutcome | null;
}

/** Every child of the run `(tenantId, key, runId)`, by item and index: what `inspect` shows. */
export async function childLinks(
  db: Executor,
  t: Tables,
  parent: { readonly tenantId: string; readonly key: string; readonly runId: string },
): Promise<ChildLink[]> {
  const { rows } = await sql<ChildLink>`/* idempo:child_links */
    SELECT key, parent_item AS item, child_index AS index, workflow, status, outcome FROM ${t.runs}
    WHERE tenant_id = ${parent.tenantId} AND parent_key = ${parent.key} AND parent_run_id = ${parent.runId}
    ORDER BY parent_item, child_index
  `.execute(db);
  return rows;
}
