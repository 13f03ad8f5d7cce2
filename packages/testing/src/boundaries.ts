import type { Workflow } from "@idempo/core";
import { outlineItem } from "@idempo/core/internal";

/**
 * Every point where a run of `workflow` can crash, in the order a run
 * passes them: `before:phase:<name>` (nothing of the phase ran),
 * `after:phase:<name>` (committed), `before:step:<name>` (start recorded,
 * not called), `called:step:<name>` (the call returned, its result is not
 * recorded yet) and `after:step:<name>` (recorded). A `.parallel` item has
 * the three step points per branch, `before:branch:<item>/<branch>`,
 * `called:branch:<item>/<branch>` and `after:branch:<item>/<branch>` (its
 * branches run at once, so a run passes them interleaved), then
 * `after:parallel:<item>` (every branch recorded, the item committed).
 *
 * @example
 * boundariesOf(checkout)
 * // ['before:phase:create_order', 'after:phase:create_order', 'before:step:charge',
 * //  'called:step:charge', 'after:step:charge', 'before:phase:record_charge', 'after:phase:record_charge']
 */
export function boundariesOf(workflow: Workflow<unknown, unknown>): string[] {
  const outline = workflow?.definition?.outline;
  if (!outline) throw new TypeError("boundariesOf needs a workflow built with workflow(...).respond(...)");
  return outline.flatMap((entry) => {
    const { kind, name, branches } = outlineItem(entry);
    if (kind === "phase") return [`before:phase:${name}`, `after:phase:${name}`];
    if (kind === "parallel" && branches) {
      const points = branches.flatMap((b) => [
        `before:branch:${name}/${b}`,
        `called:branch:${name}/${b}`,
        `after:branch:${name}/${b}`,
      ]);
      return [...points, `after:parallel:${name}`];
    }
    return [`before:step:${name}`, `called:step:${name}`, `after:step:${name}`];
  });
}

/** A call a run makes under a derived key: a step, or a branch of a parallel item (`step` is then the item). */
export interface KeyedCall {
  /** How the report names it: the step's name, or `<item>/<branch>`. */
  readonly label: string;
  readonly step: string;
  readonly branch?: string;
}

/** The steps and parallel branches of `workflow`, in order. */
export function keyedCallsOf(workflow: { readonly definition: { readonly outline: readonly string[] } }): KeyedCall[] {
  return workflow.definition.outline.flatMap((entry): KeyedCall[] => {
    const { kind, name, branches } = outlineItem(entry);
    if (kind === "step") return [{ label: name, step: name }];
    if (kind === "parallel" && branches) return branches.map((b) => ({ label: `${name}/${b}`, step: name, branch: b }));
    return [];
  });
}
