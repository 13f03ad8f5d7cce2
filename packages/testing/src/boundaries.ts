import type { Workflow } from "@idempo/core";

/**
 * Every point where a run of `workflow` can crash, in the order a run
 * passes them: `before:phase:<name>` (nothing of the phase ran),
 * `after:phase:<name>` (committed), `before:step:<name>` (start recorded,
 * not called), `called:step:<name>` (the call returned, its result is not
 * recorded yet) and `after:step:<name>` (recorded).
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
    const colon = entry.indexOf(":");
    const kind = entry.slice(0, colon);
    const name = entry.slice(colon + 1);
    return kind === "phase"
      ? [`before:phase:${name}`, `after:phase:${name}`]
      : [`before:step:${name}`, `called:step:${name}`, `after:step:${name}`];
  });
}

/** The step names of `workflow`, in order. */
export function stepsOf(workflow: { readonly definition: { readonly outline: readonly string[] } }): string[] {
  return workflow.definition.outline.filter((e) => e.startsWith("step:")).map((e) => e.slice("step:".length));
}
