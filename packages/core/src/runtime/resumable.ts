import { WorkflowDefinitionError } from "../errors.js";
import type { TakenRun } from "../store/run-store.js";
import type { Definition } from "../workflow/definition.js";

/**
 * Check that a run started under another definition can resume under this
 * one: its recovery point must still exist and every item after it must be
 * unchanged, so no step is re-derived and called again under a new name.
 */
export function checkResumable(def: Definition, taken: TakenRun): void {
  if (taken.workflow !== def.name) {
    throw new WorkflowDefinitionError(`run belongs to workflow '${taken.workflow}', not '${def.name}'`);
  }
  if (taken.definitionHash === def.hash) return;
  const rp = taken.recoveryPoint;
  const from = (outline: readonly string[]) => {
    if (rp === null) return outline;
    const idx = outline.findIndex((entry) => entry.slice(entry.indexOf(":") + 1) === rp);
    return idx < 0 ? null : outline.slice(idx + 1);
  };
  const stored = from(taken.outline);
  const current = from(def.outline);
  if (current === null || stored === null || JSON.stringify(stored) !== JSON.stringify(current)) {
    throw new WorkflowDefinitionError(
      `cannot resume workflow '${def.name}' at recovery point '${rp ?? "(start)"}': the run started under ` +
        `[${taken.outline.join(", ")}] but the current definition is [${def.outline.join(", ")}]. ` +
        "Deploy the old definition (or a new workflow name) to finish in-flight runs before renaming, reordering or removing phases and steps",
    );
  }
}
