/** The trace context of a run's current attempt, so the next attempt's trace can link to it. */

import type { Executor, Ownership, Tables } from "./run-store.js";
import { sql } from "./sql.js";

/**
 * Store the current attempt's traceparent and return the one it replaces
 * (the previous attempt's, or null). Fenced on the owner token like every
 * write of a run: an attempt that lost its lease changes nothing and gets
 * null. The CTE reads the row before the UPDATE changes it, in one statement.
 */
export async function swapTraceParent(
  db: Executor,
  t: Tables,
  own: Ownership,
  traceparent: string,
): Promise<string | null> {
  const { rows } = await sql<{ previous: string | null }>`/* idempo:trace_parent */
    WITH previous AS (
      SELECT trace_parent FROM ${t.runs} WHERE tenant_id = ${own.tenantId} AND key = ${own.key}
    )
    UPDATE ${t.runs} SET trace_parent = ${traceparent}
    WHERE tenant_id = ${own.tenantId} AND key = ${own.key} AND owner_token = ${own.ownerToken}
    RETURNING (SELECT trace_parent FROM previous) AS previous
  `.execute(db);
  return rows[0]?.previous ?? null;
}
