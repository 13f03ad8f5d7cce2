/**
 * Suspended runs that are due: how workers find them (fairly across
 * tenants) and the one statement that takes one to execute it. The same
 * take serves a client retry that finds its key due.
 */

import type { Executor, Tables, TakenRun, TakenRunRow } from "./run-store.js";
import { leaseInterval, takenRunOf } from "./run-store.js";
import { sql } from "./sql.js";

/** A due run a worker may take. */
export interface DueRun {
  readonly tenantId: string;
  readonly key: string;
  readonly workflow: string;
  /** 1 for each tenant's first due run (highest priority, then oldest), 2 for its next, ... (within the window read). */
  readonly turn: number;
}

/**
 * How many of the oldest due runs one selection reads before it orders them
 * by tenant turn. A tenant's backlog larger than this delays others by at
 * most the time to work through what is ahead of them in wake-up order;
 * within it, every tenant's oldest run comes first.
 */
const FAIR_WINDOW = 2000;

/**
 * Candidates for the next takes, at most `limit`: each tenant's first due
 * run (turn 1), then each tenant's second, and so on, oldest first within a
 * turn. Within a tenant, higher priority first (a run's enqueue `priority`,
 * else its workflow's in `priorities`, by position in `workflows`, else 0),
 * then oldest. A run whose concurrency key has no free slot is left out
 * (it would only step aside again), and so are those of a key past the
 * number of slots free, so runs behind them are taken. Only a candidate
 * list: each is taken with {@link takeDueRun}, which re-checks it under its
 * row lock.
 *
 * Cost follows the due rows, not the table: the range on `wake_at` is an
 * index condition on `runs_suspended_wake_at` because it compares with
 * `now()`, a value fixed for the statement (a bare `clock_timestamp()` would
 * force a full scan), and at most {@link FAIR_WINDOW} of them are read, plus
 * at most as many runs enqueued with a priority, highest first, from
 * `runs_suspended_priority` (which holds only those). A due run with a
 * concurrency key costs a look at its key's slots.
 */
export async function selectDueRuns(
  db: Executor,
  t: Tables,
  workflows: readonly string[],
  limit: number,
  priorities: readonly number[] = [],
): Promise<DueRun[]> {
  const held = sql.id(t.schema, "concurrency_slots_held");
  // The run is not over its limit: no key, or a slot of its key is free.
  const open = sql`CASE WHEN concurrency_key IS NULL THEN true
                        ELSE ${held}(concurrency_key, concurrency_max) < concurrency_max END`;
  const { rows } = await sql<{ tenant_id: string; key: string; workflow: string; turn: number }>`
    WITH oldest AS (
      SELECT tenant_id, key, workflow, wake_at, priority, concurrency_key, concurrency_max FROM ${t.runs}
      WHERE status = 'suspended' AND wake_at <= now()
        AND workflow = ANY(${sql.val(workflows)}::text[]) AND ${open}
      ORDER BY wake_at
      LIMIT ${FAIR_WINDOW}
    ), foremost AS (
      SELECT tenant_id, key, workflow, wake_at, priority, concurrency_key, concurrency_max FROM ${t.runs}
      WHERE status = 'suspended' AND priority IS NOT NULL AND wake_at <= now()
        AND workflow = ANY(${sql.val(workflows)}::text[]) AND ${open}
      ORDER BY priority DESC, wake_at
      LIMIT ${FAIR_WINDOW}
    ), due AS (
      SELECT *,
             coalesce(priority, (${sql.val(priorities)}::int[])[array_position(${sql.val(workflows)}::text[], workflow)],
                      0) AS prio
      FROM (SELECT * FROM oldest UNION SELECT * FROM foremost) AS d
    ), fair AS (
      SELECT tenant_id, key, workflow, wake_at, concurrency_key, concurrency_max,
             row_number() OVER (PARTITION BY tenant_id ORDER BY prio DESC, wake_at, key)::int AS turn,
             row_number() OVER (PARTITION BY concurrency_key ORDER BY prio DESC, wake_at, tenant_id, key) AS key_turn
      FROM due
    )
    SELECT tenant_id, key, workflow, turn FROM fair
    WHERE CASE WHEN concurrency_key IS NULL THEN true
               ELSE key_turn <= concurrency_max - ${held}(concurrency_key, concurrency_max) END
    ORDER BY turn, wake_at, tenant_id, key
    LIMIT ${limit}
  `.execute(db);
  return rows.map((r) => ({ tenantId: r.tenant_id, key: r.key, workflow: r.workflow, turn: r.turn }));
}

/**
 * Milliseconds until the next suspended run of these workflows becomes due
 * (DB clock), or null when none has a wake-up time. Read from the same
 * index, one entry.
 *
 * `lookbackMs` is how long ago the caller's due scan ran. A run whose
 * wake-up time fell between that scan and this read was not due for the
 * scan and would no longer be in the future here: without the look-back it
 * is in neither, and a worker that only polls would sleep its whole
 * interval past it. With it, such a run answers 1 ms (look again now).
 * Race closed: the gap between the two statements, which grows with load.
 */
export async function msUntilNextWake(
  db: Executor,
  t: Tables,
  workflows: readonly string[],
  lookbackMs: number,
): Promise<number | null> {
  const { rows } = await sql<{ ms: number | null }>`
    SELECT ceil(extract(epoch FROM (min(wake_at) - clock_timestamp())) * 1000)::float8 AS ms FROM ${t.runs}
    WHERE status = 'suspended' AND wake_at > now() - ${lookbackMs} * interval '1 millisecond'
      AND workflow = ANY(${sql.val(workflows)}::text[])
  `.execute(db);
  const ms = rows[0]?.ms ?? null;
  return ms === null ? null : Math.max(1, ms);
}

export interface TakeDueRequest {
  readonly tenantId: string;
  readonly key: string;
  readonly ownerToken: string;
  readonly leaseMs: number;
  /** A client retry must match the stored fingerprint; a worker passes null. */
  readonly fingerprint: string | null;
}

/**
 * Take a due suspended run: mint an owner token, start a lease, and return
 * what the owner needs to resume after the recovery point, in one
 * statement. Resuming after a clean suspension is not a new attempt: the
 * attempt stays (an enqueued run's attempt 0 becomes 1). A sleep's history
 * entry is closed here; a wait's is closed by the run when it reads its signal.
 *
 * Races closed: (1) two workers, or a worker and a client retry, taking one
 * run: `FOR UPDATE SKIP LOCKED` hands the row to one of them, and a loser
 * that comes after the winner's commit re-checks `status = 'suspended'` and
 * gets nothing. (2) A take against a cancel or retryFrom: whichever holds
 * the row lock first wins; the other's guard finds another status.
 *
 * @returns null when the run is not (or no longer) due, or another took it.
 */
export async function takeDueRun(db: Executor, t: Tables, req: TakeDueRequest): Promise<TakenRun | null> {
  const { rows } = await sql<TakenRunRow>`/* idempo:take_due */
    WITH due AS (
      SELECT tenant_id, key FROM ${t.runs}
      WHERE tenant_id = ${req.tenantId} AND key = ${req.key}
        AND status = 'suspended' AND wake_at <= clock_timestamp()
        AND (${req.fingerprint}::text IS NULL OR fingerprint = ${req.fingerprint})
      FOR UPDATE SKIP LOCKED
    ), taken AS (
      UPDATE ${t.runs} r
      SET status = 'in_flight', owner_token = ${req.ownerToken},
          locked_until = clock_timestamp() + ${leaseInterval(req.leaseMs)},
          attempt = GREATEST(r.attempt, 1), updated_at = clock_timestamp()
      FROM due
      WHERE r.tenant_id = due.tenant_id AND r.key = due.key
      RETURNING r.run_id, r.attempt, r.recovery_point, r.state::text AS state, r.input::text AS input,
                r.definition::text AS definition, r.definition_hash, r.workflow, r.parsed_input_hash,
                r.workflow_version
    ), woke AS (
      UPDATE ${t.history} h SET outcome = 'succeeded', finished_at = clock_timestamp()
      FROM taken
      WHERE h.tenant_id = ${req.tenantId} AND h.key = ${req.key} AND h.run_id = taken.run_id
        AND h.kind = 'sleep' AND h.outcome = 'started'
    )
    SELECT * FROM taken
  `.execute(db);
  const row = rows[0];
  return row ? takenRunOf(row) : null;
}
