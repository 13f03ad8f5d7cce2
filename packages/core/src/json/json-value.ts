import type { InputIssue } from "../errors.js";

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
 * string, `undefined` is dropped from objects and becomes `null` in arrays,
 * `-0` becomes `0`) and refusing everything that would silently change or
 * lose meaning: BigInt, functions, symbols, Map, Set, class instances,
 * cycles, NaN, Infinity, invalid dates and strings with lone surrogates.
 */
export function toJsonValue(value: unknown): JsonConversion {
  const issues: InputIssue[] = [];
  const ancestors = new Set<object>();

  const fail = (path: string, message: string): undefined => {
    if (issues.length < MAX_ISSUES) issues.push({ path, message });
    return undefined;
  };

  const checkString = (s: string, path: string, what: string): boolean => {
    if (hasLoneSurrogate(s)) {
      fail(path, `${what} holds a lone UTF-16 surrogate, which is not well-formed Unicode`);
      return false;
    }
    return true;
  };

  const walk = (v: unknown, path: string, depth: number): JsonValue | undefined => {
    if (depth > MAX_DEPTH) return fail(path, `nested deeper than ${MAX_DEPTH} levels`);
    switch (typeof v) {
      case "string":
        return checkString(v, path, "string") ? v : undefined;
      case "number":
        if (!Number.isFinite(v)) return fail(path, `${v} is not a JSON number`);
        return v === 0 ? 0 : v;
      case "boolean":
        return v;
      case "bigint":
        return fail(path, "BigInt is not a JSON value; pass it as a string");
      case "function":
        return fail(path, "a function is not a JSON value");
      case "symbol":
        return fail(path, "a symbol is not a JSON value");
      case "undefined":
        return fail(path, "undefined is not a JSON value");
    }
    if (v === null) return null;
    const obj = v as object;
    if (obj instanceof Date) {
      if (Number.isNaN(obj.getTime())) return fail(path, "invalid Date");
      return obj.toISOString();
    }
    if (ancestors.has(obj)) return fail(path, "cyclic reference");
    if (Array.isArray(obj)) {
      ancestors.add(obj);
      const out: JsonValue[] = [];
      for (let i = 0; i < obj.length; i++) {
        const item: unknown = obj[i];
        out.push(item === undefined ? null : (walk(item, `${path}[${i}]`, depth + 1) ?? null));
      }
      ancestors.delete(obj);
      return Object.freeze(out);
    }
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (proto?.constructor?.name as string | undefined) ?? "object";
      return fail(path, `${kind} is not a JSON value; convert it to a plain object, array or string`);
    }
    ancestors.add(obj);
    const out: Record<string, JsonValue> = {};
    for (const [k, item] of Object.entries(obj)) {
      if (item === undefined) continue;
      const childPath = `${path}.${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}`;
      if (!checkString(k, childPath, "key")) continue;
      const converted = walk(item, childPath, depth + 1);
      // defineProperty, not assignment: a "__proto__" member (JSON.parse keeps it as
      // data) must stay data, never become the object's prototype.
      if (converted !== undefined)
        Object.defineProperty(out, k, { value: converted, enumerable: true, writable: true, configurable: true });
    }
    ancestors.delete(obj);
    return Object.freeze(out);
  };

  const value_ = walk(value, "$", 0);
  if (issues.length > 0 || value_ === undefined) {
    return { ok: false, issues: issues.length > 0 ? issues : [{ path: "$", message: "not a JSON value" }] };
  }
  return { ok: true, value: value_ };
}
