/**
 * The JSON rules applied at each boundary where a value is stored: input
 * (400 before the claim), phase and step results and response bodies (a
 * clear error naming where, before anything is committed).
 */
import { createHash } from "node:crypto";
import type { z } from "zod";
import type { InputIssue } from "../../errors.js";
import { InputValidationError, UnstorableValueError, WorkflowDefinitionError } from "../../errors.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import { toJsonValue } from "../../json/json-value.js";
import { checkPayloadSize, fitsPayload } from "../../json/payload-size.js";
import { schemaIssue } from "../../json/schema-issue.js";
import type { Definition, Item } from "../../workflow/definition.js";

const DATE_SETTERS = Object.getOwnPropertyNames(Date.prototype).filter((name) => name.startsWith("set"));

/** A Date whose setters throw: Object.freeze cannot stop a Date's internal time from changing. */
class ImmutableDate extends Date {}
for (const name of DATE_SETTERS) {
  Object.defineProperty(ImmutableDate.prototype, name, {
    value() {
      throw new TypeError(`the run's input is immutable: Date.prototype.${name} is not allowed on it`);
    },
  });
}

/** Recursively freeze a value so workflow code cannot change what a resume will see. */
export function deepFreeze<T>(value: T): T {
  if (value instanceof Date && !(value instanceof ImmutableDate)) Object.setPrototypeOf(value, ImmutableDate.prototype);
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Caller input to its canonical JSON copy, or InputValidationError naming the path. */
export function inputToJson(input: unknown): JsonValue {
  const converted = toJsonValue(input);
  if (!converted.ok) throw new InputValidationError(converted.issues);
  return converted.value;
}

/**
 * Parse the JSON copy of the input with the workflow's schema (zod), and
 * freeze the result. Parsing the copy, not the caller's object, keeps the
 * input fixed at the claim.
 */
export async function parseInput(def: Definition, json: JsonValue): Promise<unknown> {
  if (!def.schema) return json;
  const parsed = await def.schema.safeParseAsync(json);
  if (!parsed.success) {
    throw new InputValidationError(
      parsed.error.issues.map((issue) => schemaIssue(issue, json)),
      { cause: parsed.error },
    );
  }
  return deepFreeze(parsed.data);
}

/**
 * SHA-256 of the schema's output as JSON, or null when the output is not a
 * JSON value. Compared on takeover: a schema whose default or transform is
 * not deterministic would hand a resumed attempt different input.
 */
export function parsedInputHash(parsed: unknown): string | null {
  const converted = toJsonValue(parsed);
  return converted.ok ? createHash("sha256").update(JSON.stringify(converted.value)).digest("hex") : null;
}

/** A phase or step result merged into state; `where` names it in errors. */
export function mergeState(state: JsonObject, result: unknown, where: string): JsonObject {
  if (result === undefined) return state;
  const converted = toJsonValue(result);
  if (!converted.ok) throw new UnstorableValueError(where, converted.issues);
  const value = converted.value;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new UnstorableValueError(where, [
      { path: "$", message: "must return an object (merged into state) or nothing" },
    ]);
  }
  return Object.freeze({ ...state, ...(value as JsonObject) });
}

/**
 * The state as the JSON text a commit stores. The bound applies to each
 * value on its own, not to the state that holds them all: only when the
 * whole text is over it is the value just merged (`result`) measured.
 *
 * @throws PayloadTooLargeError when `result` alone is over `maxBytes`.
 */
export function stateText(state: JsonObject, result: unknown, where: string, maxBytes: number): string {
  const text = JSON.stringify(state);
  if (result === undefined || fitsPayload(text, maxBytes)) return text;
  const converted = toJsonValue(result);
  if (converted.ok) checkPayloadSize(`the result of ${where}`, JSON.stringify(converted.value), maxBytes);
  return text;
}

/**
 * A response body as the JSON text that is stored and replayed.
 *
 * @param maxBytes the bound on the text (infinite for a body that is answered, never stored).
 * @throws UnstorableValueError when it is not JSON; PayloadTooLargeError when it is over `maxBytes`.
 */
export function bodyText(body: unknown, where: string, maxBytes: number): string {
  const converted = toJsonValue(body === undefined ? null : body);
  if (!converted.ok) throw new UnstorableValueError(where, converted.issues);
  const text = JSON.stringify(converted.value);
  checkPayloadSize(`the body of ${where}`, text, maxBytes);
  return text;
}

/** Check a response status: an integer HTTP status, 100-599. */
export function checkStatus(status: unknown, where: string): number {
  if (typeof status !== "number" || !Number.isInteger(status) || status < 100 || status > 599) {
    throw new UnstorableValueError(where, [
      { path: "status", message: `must be an integer 100-599, got ${String(status)}` },
    ]);
  }
  return status;
}

/**
 * Parse a stored input again on takeover and check it matches what the
 * schema gave at the claim.
 *
 * @throws WorkflowDefinitionError when the schema's output differs.
 */
export async function reparseInput(def: Definition, stored: JsonValue, expectedHash: string | null): Promise<unknown> {
  const parsed = await parseInput(def, stored);
  if (expectedHash !== null && def.schema && parsedInputHash(parsed) !== expectedHash) {
    throw new WorkflowDefinitionError(
      `the input schema of workflow '${def.name}' parsed the stored input differently than at the claim ` +
        "(a default or transform that is not deterministic, such as randomUUID() or new Date()); " +
        "the run is not resumed so nothing downstream receives a different value. Mint such values in a phase and keep them in state",
    );
  }
  return parsed;
}

/** A `.waitFor` item's verdict on a signal payload: the value its schema gave, or the issues it found. */
export type WaitPayloadCheck =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly issues: InputIssue[]; readonly error: z.ZodError };

/**
 * Check a signal payload against a `.waitFor` item's schema, the one rule
 * both the delivery (`engine.signal`) and the wait that merges it apply.
 * Without a schema the payload is taken as it is.
 */
export async function checkWaitPayload(
  item: Extract<Item, { kind: "wait" }>,
  payload: JsonValue,
): Promise<WaitPayloadCheck> {
  const schema = item.options.schema as z.ZodType | undefined;
  if (!schema) return { ok: true, value: payload };
  const parsed = await schema.safeParseAsync(payload);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, issues: parsed.error.issues.map((issue) => schemaIssue(issue, payload)), error: parsed.error };
}

/**
 * The error a run's history keeps for a stored signal discarded because it
 * fails the wait's schema (one stored unchecked: through SQL, or by an older
 * release): the wait and the schema's issues, never the payload itself.
 */
export function discardReason(name: string, issues: readonly InputIssue[]): string {
  const found = issues.map((i) => `${i.path}: ${i.message}`).join("; ");
  return `signal_discarded: the stored signal '${name}' fails the wait's schema (${found}); the run waits for another`;
}
