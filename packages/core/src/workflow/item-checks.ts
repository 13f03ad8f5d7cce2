/** The check every builder item shares: its name. */
import { WorkflowDefinitionError } from "../errors.js";
import { hasLoneSurrogate } from "../json/json-value.js";

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
