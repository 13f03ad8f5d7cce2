import type { InputIssue } from "../errors.js";
import { formatPath, pathSegment } from "./json-path.js";

/** A value JSON can represent faithfully: what idempo stores and fingerprints. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | JsonObject;
/** A JSON object with string keys. */
export interface JsonObject {
  readonly [key: string]: JsonValue;
}

/** Deeper nesting is refused so a hostile payload cannot exhaust the stack. */
const MAX_DEPTH = 512;
/** Stop collecting after this many issues; one is enough to refuse. */
const MAX_ISSUES = 10;

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `s` is not well-formed UTF-16 (PostgreSQL cannot store it as text or jsonb). */
export function hasLoneSurrogate(s: string): boolean {
  return LONE_SURROGATE.test(s);
}

/** Outcome of {@link toJsonValue}: a frozen plain copy, or the issues found. */
export type JsonConversion = { ok: true; value: JsonValue } | { ok: false; issues: InputIssue[] };

/**
 * Convert a caller's value to a deep-frozen plain JSON copy, following
 * JSON.stringify's rules where they are lossless (a `Date` becomes its ISO
 * string, an object with a `toJSON` method is replaced by what it returns,
 * called once with the member name as JSON.stringify calls it, `undefined`
 * is dropped from objects and becomes `null` in arrays, `-0` becomes `0`)
 * and refusing everything that would silently change or lose meaning:
 * BigInt, functions, symbols, Map, Set, other class instances, cycles, NaN,
 * Infinity, invalid dates and strings with lone surrogates. Issue paths
 * are shortened past twelve levels (see {@link formatPath}).
 */
export function toJsonValue(value: unknown): JsonConversion {
  const copy = new JsonCopy();
  const value_ = copy.walk(value, "", 0, true);
  const { issues } = copy;
  if (issues.length > 0 || value_ === undefined) {
    return { ok: false, issues: issues.length > 0 ? issues : [{ path: "$", message: "not a JSON value" }] };
  }
  return { ok: true, value: value_ };
}

/** One conversion's walk: its issues, the objects above the current value, and the path to it. */
class JsonCopy {
  readonly issues: InputIssue[] = [];
  readonly #ancestors = new Set<object>();
  // The path of the value being walked, one key or index per level, made into segments only when an issue needs it.
  readonly #path: (string | number)[] = [];
  // Set while walking what a toJSON returned, so the messages say where the value came from.
  #fromToJson = 0;

  #fail(message: string, member?: string): undefined {
    if (this.issues.length < MAX_ISSUES) {
      const segments = this.#path.map(pathSegment);
      if (member !== undefined) segments.push(pathSegment(member));
      this.issues.push({
        path: formatPath(segments),
        message: this.#fromToJson > 0 ? `${message} (returned by toJSON)` : message,
      });
    }
    return undefined;
  }

  #checkString(s: string, what: string, member?: string): boolean {
    if (hasLoneSurrogate(s)) {
      this.#fail(`${what} holds a lone UTF-16 surrogate, which is not well-formed Unicode`, member);
      return false;
    }
    return true;
  }

  #child(v: unknown, step: string | number, key: string, depth: number): JsonValue | undefined {
    this.#path.push(step);
    try {
      return this.walk(v, key, depth + 1, true);
    } finally {
      this.#path.pop();
    }
  }

  walk(v: unknown, key: string, depth: number, callToJson: boolean): JsonValue | undefined {
    if (depth > MAX_DEPTH) return this.#fail(`nested deeper than ${MAX_DEPTH} levels`);
    switch (typeof v) {
      case "string":
        return this.#checkString(v, "string") ? v : undefined;
      case "number":
        if (!Number.isFinite(v)) return this.#fail(`${v} is not a JSON number`);
        return v === 0 ? 0 : v;
      case "boolean":
        return v;
      case "bigint":
        return this.#fail("BigInt is not a JSON value; pass it as a string");
      case "function":
        return this.#fail("a function is not a JSON value");
      case "symbol":
        return this.#fail("a symbol is not a JSON value");
      case "undefined":
        return this.#fail("undefined is not a JSON value");
    }
    if (v === null) return null;
    const obj = v as object;
    if (obj instanceof Date) {
      if (Number.isNaN(obj.getTime())) return this.#fail("invalid Date");
      return obj.toISOString();
    }
    const toJSON: unknown = callToJson ? (obj as { toJSON?: unknown }).toJSON : undefined;
    if (typeof toJSON === "function") {
      // As JSON.stringify: called once, with the member name (an index as a string, '' at the root);
      // what it returns is checked by the same rules, and its own toJSON is not called again.
      let replaced: unknown;
      try {
        replaced = toJSON.call(obj, key);
      } catch (error) {
        return this.#fail(`toJSON() threw: ${error instanceof Error ? error.message : String(error)}`);
      }
      this.#fromToJson++;
      try {
        return this.walk(replaced, key, depth, false);
      } finally {
        this.#fromToJson--;
      }
    }
    const ancestors = this.#ancestors;
    if (ancestors.has(obj)) return this.#fail("cyclic reference");
    if (Array.isArray(obj)) {
      ancestors.add(obj);
      const out: JsonValue[] = [];
      for (let i = 0; i < obj.length; i++) {
        const item: unknown = obj[i];
        out.push(item === undefined ? null : (this.#child(item, i, String(i), depth) ?? null));
      }
      ancestors.delete(obj);
      return Object.freeze(out);
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (proto?.constructor?.name as string | undefined) ?? "object";
      return this.#fail(
        `${kind} is not a JSON value; convert it to a plain object, array or string, or give it a toJSON method`,
      );
    }
    ancestors.add(obj);
    const out: Record<string, JsonValue> = {};
    for (const [k, item] of Object.entries(obj)) {
      if (item === undefined) continue;
      if (!this.#checkString(k, "key", k)) continue;
      const converted = this.#child(item, k, k, depth);
      if (converted === undefined) continue;
      // Defined, not assigned, where a name is also Object.prototype's: a
      // "__proto__" member (JSON.parse keeps it as data) must stay data, never
      // become the object's prototype, and a frozen prototype refuses the
      // assignment of its names. Any other name is assigned (faster), to the same effect.
      if (k in Object.prototype)
        Object.defineProperty(out, k, { value: converted, enumerable: true, writable: true, configurable: true });
      else out[k] = converted;
    }
    ancestors.delete(obj);
    return Object.freeze(out);
  }
}
