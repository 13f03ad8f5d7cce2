import type { Workflow } from "@idempo/core";
import type { OutlineItem } from "@idempo/core/internal";
import { outlineItem } from "@idempo/core/internal";

/**
 * Every point where a run of `workflow` can crash, in the order a run
 * passes them:
 * - a phase: `before:phase:<name>` (nothing of the phase ran) and
 *   `after:phase:<name>` (committed);
 * - a step: `before:step:<name>` (start recorded, not called),
 *   `called:step:<name>` (the call returned, its result is not recorded yet)
 *   and `after:step:<name>` (recorded);
 * - a `.parallel` item: the three step points per branch,
 *   `before:branch:<item>/<branch>`, `called:branch:<item>/<branch>` and
 *   `after:branch:<item>/<branch>` (its branches run at once, so a run passes
 *   them interleaved), then `after:parallel:<item>` (every branch recorded,
 *   the item committed);
 * - a `.child` or `.map` item (`<kind>` is `child` or `map`):
 *   `started:<kind>:<item>` (children created, inside the transaction that
 *   records the item's start, before its commit), `read:<kind>:<item>` (the
 *   children read under the parent's lock, in the same transaction),
 *   `after:<kind>:<item>` (committed: the parent suspended, holding nothing),
 *   then, on the visit after the last child completed,
 *   `read:<kind>:<item>#2` (their results read, not committed) and
 *   `after:<kind>:<item>#2` (the item committed with their results);
 * - a `.sleep`: `after:sleep:<name>` (the wake-up time committed, the run
 *   suspended; the run that wakes goes on after the item without passing it
 *   again);
 * - a `.waitFor`: `locked:wait:<name>` (the run's row locked, nothing of the
 *   wait written), `after:wait:<name>` (committed: suspended until the
 *   signal), then, on the visit after the signal came,
 *   `locked:wait:<name>#2` and `after:wait:<name>#2` (the signal merged
 *   into state and the item committed).
 *
 * A point the run passes a second time carries `#2`: the engine names both
 * visits alike, the helpers count them apart. The list assumes the run
 * suspends where it can: a `.map` over no input moves on at once (its `#2`
 * points are never reached), and so does a wait whose signal was stored
 * before the run got there. An item of a kind this release does not know has
 * `after:<kind>:<name>`.
 *
 * @example
 * boundariesOf(checkout)
 * // ['before:phase:create_order', 'after:phase:create_order', 'before:step:charge',
 * //  'called:step:charge', 'after:step:charge', 'before:phase:record_charge', 'after:phase:record_charge']
 */
export function boundariesOf(workflow: Workflow<unknown, unknown>): string[] {
  const outline = workflow?.definition?.outline;
  if (!outline) throw new TypeError("boundariesOf needs a workflow built with workflow(...).respond(...)");
  return outline.flatMap((entry) => pointsOf(outlineItem(entry)));
}

/** The points of one item, in the order a run passes them. */
function pointsOf({ kind, name, branches }: OutlineItem): string[] {
  switch (kind) {
    case "phase":
      return [`before:phase:${name}`, `after:phase:${name}`];
    case "step":
      return [`before:step:${name}`, `called:step:${name}`, `after:step:${name}`];
    case "parallel": {
      const points = (branches ?? []).flatMap((b) => [
        `before:branch:${name}/${b}`,
        `called:branch:${name}/${b}`,
        `after:branch:${name}/${b}`,
      ]);
      return [...points, `after:parallel:${name}`];
    }
    case "child":
    case "map": {
      const [read, after] = [`read:${kind}:${name}`, `after:${kind}:${name}`];
      return [`started:${kind}:${name}`, read, after, `${read}#2`, `${after}#2`];
    }
    case "sleep":
      return [`after:sleep:${name}`];
    case "wait":
      return [`locked:wait:${name}`, `after:wait:${name}`, `locked:wait:${name}#2`, `after:wait:${name}#2`];
    default:
      return [`after:${kind}:${name}`];
  }
}

/**
 * Counts the points one run passes and names each visit: the point itself
 * the first time, `<point>#<n>` the `n`-th (see {@link boundariesOf}).
 */
export class VisitCounter {
  readonly #seen = new Map<string, number>();

  /** The label of this pass of `point`. */
  label(point: string): string {
    const n = (this.#seen.get(point) ?? 0) + 1;
    this.#seen.set(point, n);
    return n === 1 ? point : `${point}#${n}`;
  }
}

/** A point where `crashAtEveryBoundary` crashes: one of the run's own, or one inside a child run. */
export interface CrashPoint {
  /** How the report names it: the run's point, or `<item>[0]:<point>` for the first child of a `.child` or `.map` item. */
  readonly label: string;
  /** For a point inside a child: the item and the child's own point. */
  readonly child?: { readonly item: string; readonly point: string };
}

/**
 * The run's boundaries (see {@link boundariesOf}) and, right after each
 * `.child` or `.map` item suspends (`after:<kind>:<item>`), the boundaries
 * of that item's first child, where its run passes them.
 */
export function crashPointsOf(workflow: Workflow<unknown, unknown>): CrashPoint[] {
  const children = new Map<string, CrashPoint[]>();
  for (const item of workflow.definition.items) {
    if (item.kind !== "child" && item.kind !== "map") continue;
    const inner = boundariesOf({ definition: item.child } as Workflow<unknown, unknown>);
    const at = `after:${item.kind}:${item.name}`;
    children.set(
      at,
      inner.map((point) => ({ label: `${item.name}[0]:${point}`, child: { item: item.name, point } })),
    );
  }
  return boundariesOf(workflow).flatMap((label) => [{ label }, ...(children.get(label) ?? [])]);
}

/** A call a run makes under a derived key: a step, or a branch of a parallel item (`step` is then the item). */
export interface KeyedCall {
  /** How the report names it: the step's name, or `<item>/<branch>`. */
  readonly label: string;
  readonly step: string;
  readonly branch?: string;
}

/**
 * The steps and parallel branches of `workflow`, in order: the calls the
 * run itself makes under derived keys. A `.child` or `.map` item makes
 * none; its children are runs of their own, under keys `deriveChildKey`
 * gives (see {@link childItemsOf}).
 */
export function keyedCallsOf(workflow: { readonly definition: { readonly outline: readonly string[] } }): KeyedCall[] {
  return workflow.definition.outline.flatMap((entry): KeyedCall[] => {
    const { kind, name, branches } = outlineItem(entry);
    if (kind === "step") return [{ label: name, step: name }];
    if (kind === "parallel" && branches) return branches.map((b) => ({ label: `${name}/${b}`, step: name, branch: b }));
    return [];
  });
}

/** The names of the `.child` and `.map` items of `workflow`, in order. */
export function childItemsOf(workflow: { readonly definition: { readonly outline: readonly string[] } }): string[] {
  return workflow.definition.outline
    .map((entry) => outlineItem(entry))
    .filter((i) => i.kind === "child" || i.kind === "map")
    .map((i) => i.name);
}
