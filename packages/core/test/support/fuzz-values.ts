/**
 * The hostile values the fuzz tests draw: idempotency keys and tenant ids
 * (controls, lone surrogates, lengths around the 255-byte limit, non-strings),
 * and values for each door of `runOnce` (random JSON, JSON's edge cases, and
 * things that are not JSON, placed anywhere inside a container), each with
 * SPEC's rule for whether it is valid, written out independently of the
 * library's.
 */
import fc from "fast-check";

// ---------------------------------------------------------------------------
// Keys and tenant ids

const SPECIAL_CHARS = [
  "\u0000",
  "\u0001",
  "\u001f",
  "\u007f",
  "\u0080",
  "\u0085",
  "\u009f",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "\u200b",
  "\u202e",
  " ",
  "\t",
  "\n",
  "\ud800",
  "\udc00",
  "\ud83d\ude00",
  "é",
  "e\u0301",
  "ß",
  "İ",
  "Σ",
  "中",
  "'",
  '"',
  "\\",
  "%",
  "_",
  "/",
  ":",
];
export const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
export const keyChar = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_CHARS) },
  { weight: 2, arbitrary: codeUnit },
  { weight: 3, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) },
);
export const keyString: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: keyChar, maxLength: 24 }) },
  // Around the 255-byte limit, with 1-, 2-, 3- and 4-byte characters.
  {
    weight: 2,
    arbitrary: fc.string({ unit: fc.constantFrom("a", "é", "中", "\ud83d\ude00"), minLength: 60, maxLength: 270 }),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "",
      " ",
      "   ",
      "\t\n",
      "\u3000",
      "a".repeat(255),
      "a".repeat(256),
      "é".repeat(127),
      "é".repeat(128),
      "\ud83d\ude00".repeat(63),
      "\ud83d\ude00".repeat(64),
      "x".repeat(100_000),
      " k ",
      "K",
      "k",
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(null, undefined, 42, true, {}, [], Symbol("k"), 1n) },
);

/** True when every surrogate in `s` is half of a pair (well-formed UTF-16). */
function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

/** SPEC's rule for keys and tenant ids, written out independently of the library's. */
export function isValidKey(v: unknown): boolean {
  if (typeof v !== "string" || v.length === 0) return false;
  if (Buffer.byteLength(v, "utf8") > 255) return false;
  // Unicode category Cc: C0, DEL and C1.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(v)) return false;
  if (/^\s*$/.test(v)) return false;
  return wellFormed(v);
}

// ---------------------------------------------------------------------------
// Values: JSON, JSON's edge cases, and things that are not JSON

type Tagged = { readonly value: unknown; readonly valid: boolean; readonly label: string };

function nested(depth: number, leaf: unknown): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { d: v };
  return v;
}

class Money {
  readonly amount = 100;
}

/** Not JSON: each raises, wherever it sits. Factories, so each run gets a fresh object. */
const BAD: readonly [string, () => unknown][] = [
  ["BigInt", () => 12345678901234567890n],
  ["Map", () => new Map([["a", 1]])],
  ["Set", () => new Set([1, 2])],
  [
    "cycle",
    () => {
      const o: Record<string, unknown> = { a: 1 };
      o.self = o;
      return o;
    },
  ],
  [
    "cycle through an array",
    () => {
      const a: unknown[] = [1];
      a.push({ back: a });
      return a;
    },
  ],
  ["NaN", () => Number.NaN],
  ["Infinity", () => Number.POSITIVE_INFINITY],
  ["-Infinity", () => Number.NEGATIVE_INFINITY],
  ["lone high surrogate", () => "abc\ud800"],
  ["lone low surrogate", () => "\udfffxyz"],
  ["lone surrogate in a key", () => ({ "k\udc00": 1 })],
  ["function", () => () => 1],
  ["symbol", () => Symbol("s")],
  ["class instance", () => new Money()],
  ["invalid Date", () => new Date(Number.NaN)],
  ["Uint8Array", () => new Uint8Array([1, 2])],
  ["nesting deeper than 512", () => nested(600, 1)],
];

/** JSON's edge cases, all storable. */
const EDGE: readonly [string, () => unknown][] = [
  ["NUL in a string", () => "a\u0000b"],
  ["NUL in a key", () => ({ "k\u0000": "v" })],
  ["controls", () => "\u0001\u001f\u007f\n\t\r"],
  ["surrogate pair", () => "\ud83d\ude00 \ud834\udd1e"],
  ["-0", () => -0],
  ["large and tiny numbers", () => [1e308, 5e-324, -1e-7, 2 ** 53 + 2, 1e21]],
  ["a Date", () => new Date("2026-01-02T03:04:05.678Z")],
  ["undefined member", () => ({ a: undefined, b: 1 })],
  ["undefined in an array", () => [undefined, 1]],
  ["__proto__ member", () => JSON.parse('{"__proto__": {"polluted": true}, "x": 1}')],
  ["null-prototype object", () => Object.assign(Object.create(null), { a: 1 })],
  ["huge string", () => "x".repeat(1_000_000)],
  ["huge multi-byte string", () => "\ud83d\ude00".repeat(100_000)],
  ["nesting 500 deep", () => nested(500, "leaf")],
  ["many members", () => Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, i]))],
  ["empty containers", () => [{}, [], ""]],
];

const jsonValue = fc.jsonValue({ maxDepth: 4, stringUnit: "grapheme" });
const fromList = (list: readonly [string, () => unknown][], valid: boolean): fc.Arbitrary<Tagged> =>
  fc.constantFrom(...list).map(([label, make]) => ({ value: make(), valid, label }));

/** Put `inner` somewhere inside a random JSON container (or leave it at the top). */
const placed = (inner: fc.Arbitrary<Tagged>): fc.Arbitrary<Tagged> =>
  fc
    .tuple(inner, jsonValue, fc.string({ unit: "grapheme", maxLength: 6 }), fc.integer({ min: 0, max: 3 }))
    .map(([tag, filler, key, shape]) => {
      const v = tag.value;
      const wrapped = [v, [filler, v], { [key || "k"]: v, other: filler }, { list: [filler, { deep: [v] }] }][shape];
      return { ...tag, value: wrapped, label: `${tag.label} (shape ${shape})` };
    });

export const anyValue: fc.Arbitrary<Tagged> = fc.oneof(
  { weight: 3, arbitrary: jsonValue.map((value) => ({ value, valid: true, label: "random JSON" })) },
  {
    weight: 1,
    arbitrary: fc
      .string({ unit: codeUnit, maxLength: 12 })
      .map((value) => ({ value, valid: wellFormed(value), label: "random code units" })),
  },
  { weight: 3, arbitrary: placed(fromList(EDGE, true)) },
  { weight: 4, arbitrary: placed(fromList(BAD, false)) },
);

/** The JSON round trip a stored and replayed value makes. */
export const roundTrip = (v: unknown): string => JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? undefined : x));
