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

/** A module Node 20 cannot import by itself: TypeScript (`.ts`, `.mts`, `.cts`, `.tsx`). */
const TYPESCRIPT_MODULE = /\.[cm]?tsx?$/i;

/** Whether tsx's loader hooks are installed in this process (once is enough). */
let typescriptLoader = false;

/**
 * Make `import()` understand TypeScript through tsx's loader hooks. Nothing
 * to do when the CLI itself runs from its TypeScript source: a loader that
 * can import `.ts` is already active then. tsx is an optional peer
 * dependency, asked for only when a `.ts` module is given.
 */
async function ensureTypeScriptLoader(path: string): Promise<void> {
  if (typescriptLoader || import.meta.url.endsWith(".ts")) return;
  try {
    const { register } = await import("tsx/esm/api");
    register();
    typescriptLoader = true;
  } catch (error) {
    throw new OperationalError(
      `cannot load ${path}: a TypeScript module needs tsx (npm install --save-dev tsx); or pass the compiled .js`,
      { cause: error },
    );
  }
}

/**
 * Import a module and collect the workflows it exports: named exports, the
 * default export, or arrays of either. Duplicate names keep the first. A
 * TypeScript module (`.ts`) is loaded through tsx, which must be installed.
 *
 * @throws OperationalError when the module cannot be loaded or exports no workflow.
 */
export async function loadWorkflows(path: string): Promise<AnyWorkflow[]> {
  let mod: Record<string, unknown>;
  if (TYPESCRIPT_MODULE.test(path)) await ensureTypeScriptLoader(path);
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
