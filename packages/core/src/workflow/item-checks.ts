/** The checks builder items share: their names, and the options of a step or a branch. */
import { WorkflowDefinitionError } from "../errors.js";
import { hasLoneSurrogate } from "../json/json-value.js";
import { STEP_OPTIONS } from "../options/known-options.js";
import { MAX_TIMER_MS } from "../options/limits.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";

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
