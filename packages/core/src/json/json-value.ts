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
  const issues: InputIssue[] = [];
  const ancestors = new Set<object>();

  // The path of the value being walked, one segment per level, formatted only when an issue needs it.
  const segments: string[] = [];
  // Set while walking what a toJSON returned, so the messages say where the value came from.
  let fromToJson = 0;

  const fail = (message: string, extra?: string): undefined => {
    if (issues.length < MAX_ISSUES) {
      const path = formatPath(extra === undefined ? segments : [...segments, extra]);
      issues.push({ path, message: fromToJson > 0 ? `${message} (returned by toJSON)` : message });
    }
    return undefined;
  };

  const checkString = (s: string, what: string, extra?: string): boolean => {
    if (hasLoneSurrogate(s)) {
      fail(`${what} holds a lone UTF-16 surrogate, which is not well-formed Unicode`, extra);
      return false;
    }
    return true;
  };

  const child = (v: unknown, segment: string, key: string, depth: number): JsonValue | undefined => {
    segments.push(segment);
    try {
      return walk(v, key, depth + 1, true);
    } finally {
      segments.pop();
    }
  };

  const walk = (v: unknown, key: string, depth: number, callToJson: boolean): JsonValue | undefined => {
    if (depth > MAX_DEPTH) return fail(`nested deeper than ${MAX_DEPTH} levels`);
    switch (typeof v) {
      case "string":
        return checkString(v, "string") ? v : undefined;
      case "number":
        if (!Number.isFinite(v)) return fail(`${v} is not a JSON number`);
        return v === 0 ? 0 : v;
      case "boolean":
        return v;
      case "bigint":
        return fail("BigInt is not a JSON value; pass it as a string");
      case "function":
        return fail("a function is not a JSON value");
      case "symbol":
        return fail("a symbol is not a JSON value");
      case "undefined":
        return fail("undefined is not a JSON value");
    }
    if (v === null) return null;
    const obj = v as object;
    if (obj instanceof Date) {
      if (Number.isNaN(obj.getTime())) return fail("invalid Date");
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
        return fail(`toJSON() threw: ${error instanceof Error ? error.message : String(error)}`);
      }
      fromToJson++;
      try {
        return walk(replaced, key, depth, false);
      } finally {
        fromToJson--;
      }
    }
    if (ancestors.has(obj)) return fail("cyclic reference");
    if (Array.isArray(obj)) {
      ancestors.add(obj);
      const out: JsonValue[] = [];
      for (let i = 0; i < obj.length; i++) {
        const item: unknown = obj[i];
        out.push(item === undefined ? null : (child(item, pathSegment(i), String(i), depth) ?? null));
      }
      ancestors.delete(obj);
      return Object.freeze(out);
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (proto?.constructor?.name as string | undefined) ?? "object";
      return fail(
        `${kind} is not a JSON value; convert it to a plain object, array or string, or give it a toJSON method`,
      );
    }
    ancestors.add(obj);
    const out: Record<string, JsonValue> = {};
    for (const [k, item] of Object.entries(obj)) {
      if (item === undefined) continue;
      const segment = pathSegment(k);
      if (!checkString(k, "key", segment)) continue;
      const converted = child(item, segment, k, depth);
      // defineProperty, not assignment: a "__proto__" member (JSON.parse keeps it as
      // data) must stay data, never become the object's prototype.
      if (converted !== undefined)
        Object.defineProperty(out, k, { value: converted, enumerable: true, writable: true, configurable: true });
    }
    ancestors.delete(obj);
    return Object.freeze(out);
  };

  const value_ = walk(value, "", 0, true);
  if (issues.length > 0 || value_ === undefined) {
    return { ok: false, issues: issues.length > 0 ? issues : [{ path: "$", message: "not a JSON value" }] };
  }
  return { ok: true, value: value_ };
}
