/** The checks of what the builder is given: names, a new item, the options of a step, a branch, a wait and `.concurrency`. */
import { WorkflowDefinitionError } from "../errors.js";
import { hasLoneSurrogate } from "../json/json-value.js";
import { CONCURRENCY_OPTIONS, STEP_OPTIONS, WAIT_FOR_OPTIONS } from "../options/known-options.js";
import { MAX_STORED_MS, MAX_TIMER_MS } from "../options/limits.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import type { Item } from "./definition.js";

const NAME_MAX = 100;

/** A workflow, phase or step name: 1-100 characters, no control characters or lone surrogates; else WorkflowDefinitionError. */
export function checkName(what: string, name: unknown): asserts name is string {
  if (
    typeof name !== "string" ||
    name.length === 0 ||
    name.length > NAME_MAX ||
    /[\u0000-\u001F\u007F]/.test(name) ||
    hasLoneSurrogate(name)
  ) {
    throw new WorkflowDefinitionError(
      `${what} name must be a non-empty string of at most ${NAME_MAX} characters without control characters, got ${JSON.stringify(name)}`,
    );
  }
}

/**
 * The options of a step or a parallel branch, checked once, at build time:
 * a finished definition's options are never checked again on a call.
 *
 * @throws InvalidOptionError naming `where` and the option.
 */
export function checkStepOptions(where: string, options: unknown): void {
  checkOptions(where, STEP_OPTIONS, options);
  const o = options as { retries?: unknown; backoffMs?: unknown; maxBackoffMs?: unknown; timeoutMs?: unknown };
  intOption(where, "retries", o.retries, 0, 1_000);
  intOption(where, "backoffMs", o.backoffMs, 0, MAX_TIMER_MS);
  intOption(where, "maxBackoffMs", o.maxBackoffMs, 0, MAX_TIMER_MS);
  intOption(where, "timeoutMs", o.timeoutMs, 1, MAX_TIMER_MS);
}

/**
 * A new item of workflow `workflow`: its name, its function, and no other
 * item of the same name in `items`.
 *
 * @throws WorkflowDefinitionError naming the workflow and the item.
 */
export function checkNewItem(workflow: string, items: readonly Item[], item: Item): void {
  checkName(item.kind, item.name);
  if ((item.kind === "phase" || item.kind === "step") && typeof item.run !== "function") {
    throw new WorkflowDefinitionError(`workflow '${workflow}': ${item.kind} '${item.name}' needs a function`);
  }
  const clash = items.find((i) => i.name === item.name);
  if (clash) {
    throw new WorkflowDefinitionError(
      `workflow '${workflow}' already has a ${clash.kind} named '${item.name}'; phase and step names must be unique`,
    );
  }
}

/**
 * The options of a `.waitFor`: known names, `timeoutMs` in range, `schema` a zod schema.
 *
 * @throws InvalidOptionError naming `where` and the option; WorkflowDefinitionError for a schema that is not zod's.
 */
export function checkWaitForOptions(where: string, options: unknown): void {
  checkOptions(where, WAIT_FOR_OPTIONS, options);
  const o = options as { timeoutMs?: unknown; schema?: unknown };
  intOption(where, "timeoutMs", o.timeoutMs, 0, MAX_STORED_MS);
  if (
    o.schema !== undefined &&
    typeof (o.schema as { safeParseAsync?: unknown } | null)?.safeParseAsync !== "function"
  ) {
    throw new WorkflowDefinitionError(`${where}: schema must be a zod schema`);
  }
}

/**
 * The argument of `.concurrency`: known names, `key` and `max` given, `max` from 1 to 10 000.
 *
 * @throws InvalidOptionError naming `where` and the option.
 */
export function checkConcurrency(where: string, limit: unknown): void {
  checkOptions(where, CONCURRENCY_OPTIONS, limit);
  intOption(where, "max", (limit as { max?: unknown }).max, 1, 10_000);
}

/**
 * The argument of `.input`: a zod schema, given before the first item.
 *
 * @throws WorkflowDefinitionError naming the workflow.
 */
export function checkInputSchema(workflow: string, items: readonly Item[], schema: unknown): void {
  if (items.length > 0)
    throw new WorkflowDefinitionError(`workflow '${workflow}': call .input() before the first phase or step`);
  if (typeof (schema as { safeParseAsync?: unknown } | undefined)?.safeParseAsync !== "function") {
    throw new WorkflowDefinitionError(
      `workflow '${workflow}': .input() needs a zod schema such as z.object(...), got ${
        schema === null ? "null" : typeof schema
      } without safeParseAsync`,
    );
  }
}
