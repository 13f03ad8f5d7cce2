/**
 * The runs of given schedule ticks, for the schedules page: a tick's run has
 * the key `schedule:<name>:<tick>` in the schedule's tenant, so the runs of
 * a schedule's last ticks are primary-key probes of the keys the engine
 * computes from the cron expression, never a scan for a key prefix (which
 * no index of `runs` can serve under a database's own collation). A record
 * swept past retention answers from its tombstone. Read-only.
 */

import type { Executor, RunOutcome, RunStatus, Tables } from "./run-store.js";
import { sql } from "./sql.js";

/** What is stored for one key: its record, or only its tombstone (`status: 'expired'`). */
export interface TickRunRow {
  /** Position of the key in the request (0-based). */
  i: number;
  status: RunStatus | "expired";
  outcome: RunOutcome | null;
  attempt: number | null;
  created_at: Date | null;
  completed_at: Date | null;
}

/** The record or tombstone of each `(tenantId, key)` that has one; keys with neither are absent from the answer. */
export async function selectTickRuns(
  db: Executor,
  t: Tables,
  keys: readonly { tenantId: string; key: string }[],
): Promise<TickRunRow[]> {
  if (keys.length === 0) return [];
  const { rows } = await sql<TickRunRow>`
    SELECT (w.i - 1)::int AS i, coalesce(r.status, 'expired') AS status, coalesce(r.outcome, tb.outcome) AS outcome,
           r.attempt, r.created_at, coalesce(r.completed_at, tb.completed_at) AS completed_at
    FROM unnest(${keys.map((k) => k.tenantId)}::text[], ${keys.map((k) => k.key)}::text[])
      WITH ORDINALITY AS w (tenant_id, key, i)
    LEFT JOIN ${t.runs} AS r ON r.tenant_id = w.tenant_id AND r.key = w.key
    LEFT JOIN ${t.tombstones} AS tb
      ON r.key IS NULL AND tb.tenant_id = w.tenant_id AND tb.key_digest = ${t.keyDigest}(w.key)
    WHERE r.key IS NOT NULL OR tb.tenant_id IS NOT NULL
    ORDER BY w.i`.execute(db);
  return rows;
}
