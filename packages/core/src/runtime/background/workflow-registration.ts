/**
 * A worker registers the workflow versions it runs (`workflow_versions`,
 * migration 0017), so that the SQL interface's `enqueue` can create runs of
 * them for programs that know a workflow only by name: each with the
 * outline, version, retention and tombstone time this engine would give it.
 */
import type { WorkflowVersionRow } from "../../store/workflow-versions.js";
import { registerWorkflowVersions } from "../../store/workflow-versions.js";
import type { Definition } from "../../workflow/definition.js";
import type { EngineContext } from "../engine-context.js";
import { tombstoneMsOf } from "../engine-context.js";

/** Register every deployed version of each workflow (each list newest first, as `deployedByName` gives it). */
export async function registerWorkflows(ctx: EngineContext, deployed: Iterable<readonly Definition[]>): Promise<void> {
  const rows: WorkflowVersionRow[] = [];
  for (const versions of deployed) {
    for (const def of versions) {
      rows.push({
        workflow: def.name,
        version: def.version,
        outline: def.outline,
        definitionHash: def.hash,
        retentionMs: def.options.retentionMs ?? ctx.retentionMs,
        tombstoneMs: tombstoneMsOf(def),
      });
    }
  }
  await registerWorkflowVersions(ctx.db, ctx.tables, rows);
}
