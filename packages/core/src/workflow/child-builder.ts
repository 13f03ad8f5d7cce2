/** The items `.child` and `.map` add: child runs of another workflow, started by the parent, which waits for them. */
import { WorkflowDefinitionError } from "../errors.js";
import { CHILD_OPTIONS, MAP_OPTIONS } from "../options/known-options.js";
import { MAX_CHILDREN, MAX_STORED_MS } from "../options/limits.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import type { ChildOptions, ChildrenItem, Definition, Item, MapOptions, Workflow } from "./definition.js";
import { checkName } from "./item-checks.js";

/**
 * The item `.child(name, wf, input, options)` or `.map(name, wf, inputs,
 * options)` adds to `workflow`, its arguments checked (`.child` takes only
 * `timeoutMs`).
 *
 * @throws WorkflowDefinitionError when `wf` is not a finished workflow or `inputs` not a function.
 * @throws InvalidOptionError on an unknown option, or a `concurrency` or `timeoutMs` out of range.
 */
export function childItem(
  workflow: string,
  kind: "child" | "map",
  name: string,
  wf: Workflow<unknown, unknown>,
  inputs: unknown,
  options: ChildOptions | MapOptions,
): Item {
  const many = kind === "map";
  const where = `workflow '${workflow}', ${kind} '${name}'`;
  checkName(kind, name);
  const child = (wf as { definition?: Definition } | undefined)?.definition;
  if (!child?.items) {
    throw new WorkflowDefinitionError(`${where} needs a child workflow built with workflow(...).respond(...)`);
  }
  if (typeof inputs !== "function") {
    throw new WorkflowDefinitionError(
      `${where} needs a function of the run returning the child's input${many ? "s (an array)" : ""}`,
    );
  }
  checkOptions(where, many ? MAP_OPTIONS : CHILD_OPTIONS, options);
  if (many) intOption(where, "concurrency", (options as MapOptions).concurrency, 1, MAX_CHILDREN);
  intOption(where, "timeoutMs", options.timeoutMs, 1, MAX_STORED_MS);
  return Object.freeze({
    kind,
    name,
    child,
    inputs: inputs as ChildrenItem<"map">["inputs"],
    options: Object.freeze({ ...options }),
  }) as Item;
}
