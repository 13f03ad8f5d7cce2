import { WorkflowDefinitionError } from "../../errors.js";
import type { TakenRun } from "../../store/run-store.js";
import type { Definition } from "../../workflow/definition.js";

/**
 * True when `def` can finish a run that stopped at its recovery point: the
 * recovery point exists in `def` and every item after it is unchanged
 * (kind and name, in order), so no step is re-derived and called again
 * under a new name and no finished item is run twice.
 */
function admits(def: Definition, taken: TakenRun): boolean {
  if (taken.definitionHash === def.hash) return true;
  const rp = taken.recoveryPoint;
  const from = (outline: readonly string[]) => {
    if (rp === null) return outline;
    const idx = outline.findIndex((entry) => entry.slice(entry.indexOf(":") + 1) === rp);
    return idx < 0 ? null : outline.slice(idx + 1);
  };
  const stored = from(taken.outline);
  const current = from(def.outline);
  return current !== null && stored !== null && JSON.stringify(stored) === JSON.stringify(current);
}

/** What to do about a run no deployed version can finish, by why none can. */
function advice(deployed: readonly Definition[], taken: TakenRun): string {
  const name = deployed[0]?.name ?? taken.workflow;
  const newest = deployed[0]?.version ?? 1;
  const v = taken.workflowVersion;
  const later = "; or finish the run by hand with engine.cancel";
  if (deployed.some((d) => d.version === v)) {
    return (
      `Version ${v} was changed in place: renaming, reordering or removing phases and steps needs a new version. ` +
      `Restore version ${v}'s items and put the change under a higher one ` +
      `(workflow('${name}').version(${newest + 1}).replaces(v${v}))${later}`
    );
  }
  if (v < newest) {
    return (
      `Keep version ${v} deployed until its runs finish: give it to .replaces(...) of version ${newest}, ` +
      `or list it in the workflows of resumeStale/startWorker${later}`
    );
  }
  return (
    `Version ${v} is newer than the deployed ones: during a rolling deploy a process with version ${v} will ` +
    `take the run once its lease runs out; to roll back, deploy the old code as version ${v + 1} ` +
    `with .replaces(v${v}) so that version ${v}'s runs still finish${later}`
  );
}

/**
 * Choose the deployed definition that resumes a stored run: its own
 * version when that is deployed and admits the run, else the newest
 * deployed version above it whose outline from the recovery point on is
 * the same as the run's (what an unversioned redeploy always did). A
 * version below the run's is never used: during a rolling deploy an old
 * process refuses a new version's run, which waits its lease out for a
 * new process.
 *
 * @param deployed the versions of the run's workflow this process runs, newest first (never empty).
 * @throws WorkflowDefinitionError when the run belongs to another workflow,
 * or when no deployed version can finish it; the message names the run's
 * version and outline, every deployed one, and what to do.
 */
export function pickDefinition(deployed: readonly Definition[], taken: TakenRun): Definition {
  const newest = deployed[0] as Definition;
  if (taken.workflow !== newest.name) {
    throw new WorkflowDefinitionError(`run belongs to workflow '${taken.workflow}', not '${newest.name}'`);
  }
  const v = taken.workflowVersion;
  // Never an older version: it cannot know what a newer one's items wrote into state.
  const order = [...deployed.filter((d) => d.version === v), ...deployed.filter((d) => d.version > v)];
  const fit = order.find((d) => admits(d, taken));
  if (fit) return fit;
  const plural = deployed.length > 1 ? "no deployed version has" : "the deployed definition does not have";
  throw new WorkflowDefinitionError(
    `cannot resume workflow '${newest.name}' at recovery point '${taken.recoveryPoint ?? "(start)"}': ` +
      `the run started under version ${taken.workflowVersion} [${taken.outline.join(", ")}] and ${plural} ` +
      `that recovery point followed by the same items (deployed: ${deployed
        .map((d) => `version ${d.version} [${d.outline.join(", ")}]`)
        .join("; ")}). ${advice(deployed, taken)}`,
  );
}
