/** The checks every builder item shares: its name, and the shape of its options. */
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import { hasLoneSurrogate } from "../json/json-value.js";

const NAME_MAX = 100;
/**
 * Options of an item must be an object (or left out): `null`, a number or
 * an array would otherwise fail later as a TypeError, not a typed error.
 */
export function checkItemOptions(where: string, options: unknown): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new InvalidOptionError("options", `${where}: options must be an object, got ${String(options)}`);
  }
}

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
