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

/** `String.prototype.isWellFormed` (ES2024, in every Node this package supports; not in the ES2023 lib types). */
const isWellFormed = (String.prototype as unknown as { isWellFormed: (this: string) => boolean }).isWellFormed;

/** True when `s` is not well-formed UTF-16: a lone surrogate (PostgreSQL cannot store it as text or jsonb). */
export function hasLoneSurrogate(s: string): boolean {
  return !isWellFormed.call(s);
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
  const walker = new Walker();
  const converted = walker.walk(value, "", 0, true);
  const { issues } = walker;
  if (issues.length > 0 || converted === undefined) {
    return { ok: false, issues: issues.length > 0 ? issues : [{ path: "$", message: "not a JSON value" }] };
  }
  return { ok: true, value: converted };
}

/** One conversion's walk; the path is kept as raw keys and formatted only when an issue needs it. */
class Walker {
  readonly issues: InputIssue[] = [];
  readonly #ancestors = new Set<object>();
  /** The keys and indexes from the root to the value being walked. */
  readonly #path: (string | number)[] = [];
  /** Set while walking what a toJSON returned, so the messages say where the value came from. */
  #fromToJson = 0;

  #fail(message: string, extra?: string): undefined {
    if (this.issues.length < MAX_ISSUES) {
      const keys = extra === undefined ? this.#path : [...this.#path, extra];
      this.issues.push({
        path: formatPath(keys.map(pathSegment)),
        message: this.#fromToJson > 0 ? `${message} (returned by toJSON)` : message,
      });
    }
    return undefined;
  }

  #child(v: unknown, at: string | number, key: string, depth: number): JsonValue | undefined {
    this.#path.push(at);
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
        return isWellFormed.call(v)
          ? v
          : this.#fail("string holds a lone UTF-16 surrogate, which is not well-formed Unicode");
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
    if (this.#ancestors.has(obj)) return this.#fail("cyclic reference");
    if (Array.isArray(obj)) {
      this.#ancestors.add(obj);
      const out: JsonValue[] = [];
      for (let i = 0; i < obj.length; i++) {
        const item: unknown = obj[i];
        out.push(item === undefined ? null : (this.#child(item, i, String(i), depth) ?? null));
      }
      this.#ancestors.delete(obj);
      return Object.freeze(out);
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (proto?.constructor?.name as string | undefined) ?? "object";
      return this.#fail(
        `${kind} is not a JSON value; convert it to a plain object, array or string, or give it a toJSON method`,
      );
    }
    this.#ancestors.add(obj);
    const out: Record<string, JsonValue> = {};
    for (const k of Object.keys(obj)) {
      const item: unknown = (obj as Record<string, unknown>)[k];
      if (item === undefined) continue;
      if (!isWellFormed.call(k)) {
        this.#fail("key holds a lone UTF-16 surrogate, which is not well-formed Unicode", k);
        continue;
      }
      const converted = this.#child(item, k, k, depth);
      if (converted === undefined) continue;
      // Defined, not assigned, where the name is also Object.prototype's: a "__proto__" member (JSON.parse
      // keeps it as data) must stay data, never become the object's prototype.
      if (k in Object.prototype)
        Object.defineProperty(out, k, { value: converted, enumerable: true, writable: true, configurable: true });
      else out[k] = converted;
    }
    this.#ancestors.delete(obj);
    return Object.freeze(out);
  }
}
