/**
 * The one check every options object of idempo goes through (the engine's,
 * a call's, a builder item's, and those of `@idempo/http` and
 * `@idempo/testing`): a key it does not know is refused, naming the key,
 * the known key it resembles and every known one, so that a misspelling
 * (`timeOutMs`) never turns an option off silently; a value of the wrong
 * type is refused naming its type (`got the string "10"`).
 *
 * Hand-written rather than a zod strict object because `runOnce` and
 * `outbox.enqueue` check on every call: a shape is built once, at module
 * load, and checking an object allocates nothing unless it fails.
 */
import { InvalidOptionError } from "../errors.js";

/** What one option must be: a test and the words an error uses for it ("a function"). */
export interface OptionKind {
  readonly what: string;
  readonly is: (value: unknown) => boolean;
}

/** The options an object may have, what each must be, and which are required. Build with {@link optionShape}. */
export interface OptionShape {
  readonly kinds: Readonly<Record<string, OptionKind>>;
  readonly required: readonly string[];
  /** The known keys, sorted and joined, for the error message. */
  readonly known: string;
}

/** An option kind from its description and its test. */
export function optionKind(what: string, is: (value: unknown) => boolean): OptionKind {
  return Object.freeze({ what, is });
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Any value; the API checks it further (a key, a JSON body). */
export const ANY: OptionKind = optionKind("any value", () => true);
/** A string. */
export const STRING: OptionKind = optionKind("a string", (v) => typeof v === "string");
/** A number of ms, bytes or items; its range is checked where it is read (see `intOption`). */
export const INTEGER: OptionKind = optionKind("an integer", (v) => typeof v === "number");
/** `true` or `false`. */
export const BOOLEAN: OptionKind = optionKind("true or false", (v) => typeof v === "boolean");
/** A function. */
export const FUNCTION: OptionKind = optionKind("a function", (v) => typeof v === "function");
/** A plain object (not null, not an array). */
export const OBJECT: OptionKind = optionKind("an object", isObject);
/** An array. */
export const ARRAY: OptionKind = optionKind("an array", Array.isArray);

/**
 * The shape of one options object, made once (at module load) and shared
 * by every call.
 *
 * @param kinds every known option and what it must be.
 * @param required the options that must be given (not undefined).
 */
export function optionShape(
  kinds: Readonly<Record<string, OptionKind>>,
  required: readonly string[] = [],
): OptionShape {
  // No prototype: a key such as `toString` or `__proto__` is unknown like any other.
  const own: Record<string, OptionKind> = Object.assign(Object.create(null), kinds);
  return Object.freeze({
    kinds: Object.freeze(own),
    required: Object.freeze([...required]),
    known: Object.keys(kinds).sort().join(", "),
  });
}

const article = (word: string) => (/^[aeiou]/i.test(word) ? "an" : "a");

/**
 * A value as an error message shows it, with its type: `the number 10`,
 * `the string "10"`, `the boolean true`, `null`, `an array`, `an object`,
 * `a Date`.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "number":
      return `the number ${value}`;
    case "string":
      return `the string ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value)}`;
    case "boolean":
      return `the boolean ${value}`;
    case "bigint":
      return `the bigint ${value}n`;
    case "undefined":
      return "undefined";
    case "function":
      return "a function";
    case "symbol":
      return "a symbol";
    default: {
      if (value === null) return "null";
      if (Array.isArray(value)) return "an array";
      const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
      return typeof name === "string" && name !== "" && name !== "Object" ? `${article(name)} ${name}` : "an object";
    }
  }
}

/** True when `a` and `b` differ by case alone, or by one inserted, deleted or changed character. */
function resembles(a: string, b: string): boolean {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  if (x === y) return true;
  if (Math.abs(x.length - y.length) > 1) return false;
  let i = 0;
  while (i < x.length && x[i] === y[i]) i++;
  // After the first difference the rest must match, skipping one character on the longer side (or both).
  return x.slice(i + (x.length >= y.length ? 1 : 0)) === y.slice(i + (y.length >= x.length ? 1 : 0));
}

function unknownOption(where: string, shape: OptionShape, key: string): InvalidOptionError {
  const like = Object.keys(shape.kinds).find((known) => resembles(key, known));
  return new InvalidOptionError(
    key,
    `${where}: unknown option '${key}'${like === undefined ? "" : ` (did you mean '${like}'?)`}; ` +
      `the known options are ${shape.known}`,
  );
}

/**
 * Check an options object against its shape: an object (or `undefined`
 * when nothing is required), no unknown key, every value of its kind
 * (`undefined` counts as not given), every required one given.
 *
 * @param where the API, as errors name it: `createEngine`, `workflow 'checkout', step 'charge'`.
 * @param what how errors name the object itself (Default: `options`).
 * @throws InvalidOptionError naming the first bad option (`option`), or `options` when the object itself is bad.
 */
export function checkOptions(where: string, shape: OptionShape, options: unknown, what = "options"): void {
  if (options === undefined && shape.required.length === 0) return;
  if (!isObject(options)) {
    throw new InvalidOptionError("options", `${where}: ${what} must be an object, got ${describeValue(options)}`);
  }
  for (const key in options) {
    const kind = shape.kinds[key];
    if (kind === undefined) throw unknownOption(where, shape, key);
    const value = options[key];
    if (value !== undefined && !kind.is(value)) {
      throw new InvalidOptionError(key, `${where}: ${key} must be ${kind.what}, got ${describeValue(value)}`);
    }
  }
  for (const key of shape.required) {
    if (options[key] === undefined) {
      throw new InvalidOptionError(key, `${where}: ${key} is required (${shape.kinds[key]?.what})`);
    }
  }
}
