/** Loading the user's workflow definitions for `idempo resume --workflows`. */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Workflow } from "@idempo/core";
import { OperationalError } from "./errors.js";

// biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
type AnyWorkflow = Workflow<any, any>;

function isWorkflow(value: unknown): value is AnyWorkflow {
  if (typeof value !== "object" || value === null) return false;
  const v = value as { name?: unknown; definition?: { outline?: unknown } };
  return typeof v.name === "string" && typeof v.definition === "object" && Array.isArray(v.definition?.outline);
}

/**
 * Import a module and collect the workflows it exports: named exports, the
 * default export, or arrays of either. Duplicate names keep the first.
 *
 * @throws OperationalError when the module cannot be loaded or exports no workflow.
 */
export async function loadWorkflows(path: string): Promise<AnyWorkflow[]> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    const cause = error instanceof Error ? error.message.split("\n")[0] : String(error);
    throw new OperationalError(`cannot load workflows from ${path}: ${cause}`, { cause: error });
  }
  const found = new Map<string, AnyWorkflow>();
  for (const value of Object.values(mod)) {
    for (const candidate of Array.isArray(value) ? value : [value]) {
      if (isWorkflow(candidate) && !found.has(candidate.name)) found.set(candidate.name, candidate);
    }
  }
  if (found.size === 0) {
    throw new OperationalError(
      `${path} exports no workflow: export the definitions built with workflow(...).respond(...)`,
    );
  }
  return [...found.values()];
}
