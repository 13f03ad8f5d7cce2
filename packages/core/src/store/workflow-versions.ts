/**
 * The workflow versions a worker runs, kept in `workflow_versions`
 * (migration 0017) for the SQL interface: the SQL function `enqueue` knows
 * a workflow only by name and takes from here the outline, version,
 * retention and tombstone time a run of it is created with.
 */

import type { Executor, Tables } from "./run-store.js";
import { sql } from "./sql.js";

/** One registered version. */
export interface WorkflowVersionRow {
  readonly workflow: string;
  readonly version: number;
  /** The `kind:name` outline and its hash, as a run stores them. */
  readonly outline: readonly string[];
  readonly definitionHash: string;
  readonly retentionMs: number;
  readonly tombstoneMs: number;
}

/**
 * Register versions, in one statement: a new one is inserted, a changed one
 * (another outline, retention or tombstone time) overwritten, an unchanged
 * one left as it is, so that workers restarting write nothing.
 *
 * Race closed: two workers starting at once. `ON CONFLICT` makes the second
 * insert of a version an update, which waits for the first one's row lock.
 */
export async function registerWorkflowVersions(
  db: Executor,
  t: Tables,
  rows: readonly WorkflowVersionRow[],
): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map(
    (r) =>
      sql`(${r.workflow}, ${r.version}::integer, ${JSON.stringify(r.outline)}::json, ${r.definitionHash},
           ${r.retentionMs}::bigint, ${r.tombstoneMs}::bigint)`,
  );
  await sql`/* idempo:register_workflows */
    INSERT INTO ${t.workflowVersions} AS w (workflow, version, definition, definition_hash, retention_ms, tombstone_ms)
    VALUES ${sql.join(values)}
    ON CONFLICT (workflow, version) DO UPDATE
    SET definition = EXCLUDED.definition, definition_hash = EXCLUDED.definition_hash,
        retention_ms = EXCLUDED.retention_ms, tombstone_ms = EXCLUDED.tombstone_ms, registered_at = now()
    WHERE (w.definition_hash, w.retention_ms, w.tombstone_ms)
          IS DISTINCT FROM (EXCLUDED.definition_hash, EXCLUDED.retention_ms, EXCLUDED.tombstone_ms)
  `.execute(db);
}
