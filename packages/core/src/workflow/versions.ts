/**
 * Versions of one workflow deployed side by side. A run is stored with the
 * version that started it; when it is resumed (a retry, `resumeStale`, a
 * worker) the engine chooses among the deployed versions of its workflow
 * (see `pickDefinition` in runtime/resumable.ts). This file builds and
 * checks those sets: at build time (`.version`, `.replaces`) and when a list
 * of workflows is handed to `resumeStale` or `startWorker`.
 */
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import type { Definition, Workflow } from "./definition.js";
import { outlineEntry, outlineHash } from "./definition.js";

/** What `.version` and `.replaces` collected so far; checked together in `respond`. */
export interface Versioning {
  readonly version: number | undefined;
  readonly replaces: readonly unknown[];
}

export const UNVERSIONED: Versioning = Object.freeze({ version: undefined, replaces: Object.freeze([]) });

/** The largest version number: what the `workflow_version integer` column holds. */
const MAX_VERSION = 2_147_483_647;

/**
 * `version` when it is an integer from 1 to 2 147 483 647.
 *
 * @throws WorkflowDefinitionError naming the workflow and the value otherwise.
 */
export function checkVersion(name: string, version: unknown): number {
  if (typeof version !== "number" || !Number.isInteger(version) || version < 1 || version > MAX_VERSION) {
    throw new WorkflowDefinitionError(
      `workflow '${name}': version must be an integer from 1 to ${MAX_VERSION}, got ${
        typeof version === "number" ? String(version) : (JSON.stringify(version) ?? String(version))
      }`,
    );
  }
  return version;
}

function describe(def: Definition): string {
  return `version ${def.version} [${def.outline.join(", ")}]`;
}

/** Add `def` to `into` unless that very definition is there; two different definitions of one version clash. */
function addVersion(into: Definition[], def: Definition, clash: (a: Definition, b: Definition) => Error): void {
  const same = into.find((d) => d.version === def.version);
  if (same === def) return;
  if (same) throw clash(same, def);
  into.push(def);
}

const newestFirst = (a: Definition, b: Definition) => b.version - a.version;

/**
 * The older definitions a new version keeps deployed: those given to
 * `.replaces(...)` and, transitively, the ones they replace, newest first.
 * The same definition reached twice counts once.
 *
 * @param name the workflow being built; @param version its version.
 * @throws WorkflowDefinitionError when an argument is not a finished
 * workflow, belongs to another workflow name, has a version not below
 * `version`, or when two different definitions carry the same version.
 */
function olderVersions(name: string, version: number, given: readonly unknown[]): readonly Definition[] {
  const older: Definition[] = [];
  given.forEach((w, i) => {
    const def = (w as { definition?: Definition } | undefined)?.definition;
    if (!def?.items || typeof def.version !== "number") {
      throw new WorkflowDefinitionError(
        `workflow '${name}': replaces(...)[${i}] is not a workflow built with workflow(...).respond(...)`,
      );
    }
    if (def.name !== name) {
      throw new WorkflowDefinitionError(
        `workflow '${name}' cannot replace workflow '${def.name}': versions share one name (the name is part of the fingerprint)`,
      );
    }
    for (const d of [def, ...def.replaces]) {
      if (d.version >= version) {
        throw new WorkflowDefinitionError(
          `workflow '${name}' version ${version} cannot replace ${describe(d)}: a replaced version must be lower; ` +
            "number the new definition above the ones it replaces with .version(n)",
        );
      }
      addVersion(
        older,
        d,
        (a, b) =>
          new WorkflowDefinitionError(
            `workflow '${name}' version ${version} replaces two different definitions numbered ${a.version}: ` +
              `[${a.outline.join(", ")}] and [${b.outline.join(", ")}]; each version number names one definition`,
          ),
      );
    }
  });
  return Object.freeze(older.sort(newestFirst));
}

/**
 * The finished workflow `respond` returns: the definition of `parts`, with
 * its outline, hash, version (1 unless set) and the older versions it
 * replaces, checked.
 *
 * @throws WorkflowDefinitionError as {@link olderVersions}.
 */
export function finishedWorkflow(
  parts: Pick<Definition, "name" | "schema" | "items" | "respond" | "options" | "accepted">,
  versioning: Versioning,
): Workflow<never, never> {
  const outline = parts.items.map(outlineEntry);
  const version = versioning.version ?? 1;
  const replaces = olderVersions(parts.name, version, versioning.replaces);
  const definition: Definition = Object.freeze({
    ...parts,
    outline: Object.freeze(outline),
    hash: outlineHash(outline),
    version,
    replaces,
  });
  return Object.freeze({ name: parts.name, version, definition });
}

/** The deployed definitions of `def`'s workflow, newest first: `def` itself, then what it replaces. */
export function versionsOf(def: Definition): readonly Definition[] {
  return [def, ...def.replaces];
}

/**
 * The definitions `resumeStale` and `startWorker` may run, by workflow name,
 * each list newest first: every workflow given, with the versions it
 * replaces. Several versions of one name may be given (`[checkoutV2,
 * checkoutV1]`); the same definition given twice counts once.
 *
 * @throws InvalidOptionError (`workflows`) when the list is empty, holds
 * something that is not a finished workflow, or holds two different
 * definitions with one name and version.
 */
export function deployedByName(where: string, workflows: unknown): Map<string, readonly Definition[]> {
  if (!Array.isArray(workflows) || workflows.length === 0) {
    throw new InvalidOptionError("workflows", `${where}: workflows must be a non-empty array of workflows`);
  }
  const byName = new Map<string, Definition[]>();
  workflows.forEach((w: { definition?: Definition } | undefined, i) => {
    const def = w?.definition;
    if (!def?.items) {
      throw new InvalidOptionError(
        "workflows",
        `${where}: workflows[${i}] is not a workflow built with workflow(...).respond(...)`,
      );
    }
    const list = byName.get(def.name) ?? [];
    byName.set(def.name, list);
    for (const d of versionsOf(def)) {
      addVersion(
        list,
        d,
        (a, b) =>
          new InvalidOptionError(
            "workflows",
            `${where}: workflows hold two different definitions of workflow '${def.name}' version ${a.version}: ` +
              `[${a.outline.join(", ")}] and [${b.outline.join(", ")}]; give each version its own number`,
          ),
      );
    }
  });
  for (const list of byName.values()) list.sort(newestFirst);
  addChildWorkflows(byName);
  return byName;
}

/**
 * The child workflows of `.child` and `.map` items run where their parents
 * do: each one not given by name is added with its versions, and so are
 * its own children in turn. A child workflow given in the list wins.
 */
function addChildWorkflows(byName: Map<string, Definition[]>): void {
  const queue = [...byName.values()].flat();
  for (let def = queue.shift(); def; def = queue.shift()) {
    for (const item of def.items) {
      if ((item.kind !== "child" && item.kind !== "map") || byName.has(item.child.name)) continue;
      const versions = [...versionsOf(item.child)].sort(newestFirst);
      byName.set(item.child.name, versions);
      queue.push(...versions);
    }
  }
}

/**
 * `def`'s own versions (newest first) and, under their names, the child
 * workflows its `.child` and `.map` items run, theirs in turn: what a
 * worker given `def` would run.
 */
export function withChildWorkflows(def: Definition): Map<string, readonly Definition[]> {
  const byName = new Map<string, Definition[]>([[def.name, [...versionsOf(def)].sort(newestFirst)]]);
  addChildWorkflows(byName);
  return byName;
}

/** The `.priority` of the newest deployed version of each of `names` (0 when it sets none), in that order. */
export function prioritiesOf(byName: ReadonlyMap<string, readonly Definition[]>, names: readonly string[]): number[] {
  return names.map((name) => byName.get(name)?.[0]?.options.priority ?? 0);
}
