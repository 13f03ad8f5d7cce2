import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { describe, expect, it } from "vitest";
import { requestFingerprint } from "./fingerprint.js";
import type { JsonValue } from "./json-value.js";
import { toJsonValue } from "./json-value.js";

/** The fingerprint of a caller's value, as the engine computes it (toJsonValue first). */
function fp(value: unknown, wf = "checkout"): string {
  const r = toJsonValue(value);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return requestFingerprint(wf, r.value);
}

/** RFC 8785 §3.2.3: the sorting example, in an order that is not the canonical one. */
const RFC_SORTING_EXAMPLE = {
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis",
};
const RFC_SORTED_KEYS = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\ud83d\ude00", "\ufb33"];

describe("canonicalization: requestFingerprint", () => {
  it("is a stable SHA-256 hex digest", () => {
    const v = { cartId: "c1", amountCents: 500 };
    expect(fp(v)).toMatch(/^[0-9a-f]{64}$/);
    expect(fp(v)).toBe(fp({ cartId: "c1", amountCents: 500 }));
  });

  it("is sha256(workflow name, NUL, RFC 8785 canonical JSON), as documented", () => {
    const text = '{"a":[1,"x",null,true],"b":{"c":1.5}}';
    const expected = createHash("sha256").update(`w\u0000${text}`).digest("hex");
    expect(fp({ b: { c: 1.5 }, a: [1, "x", null, true] }, "w")).toBe(expected);
  });

  it("depends on the workflow name", () => {
    const v = { cartId: "c1" };
    expect(fp(v, "checkout")).not.toBe(fp(v, "refund"));
    expect(fp(v, "checkout")).not.toBe(fp(v, "Checkout"));
  });

  it("ignores object key order, at every depth", () => {
    const a = { amount: 100, currency: "eur", meta: { b: 1, a: 2, deep: { y: [1, { q: 1, p: 2 }], x: 0 } } };
    const b = { meta: { deep: { x: 0, y: [1, { p: 2, q: 1 }] }, a: 2, b: 1 }, currency: "eur", amount: 100 };
    expect(fp(a)).toBe(fp(b));
  });

  it("treats keys that differ only in case as distinct keys and still ignores their order", () => {
    expect(fp({ a: 1, A: 2 })).toBe(fp({ A: 2, a: 1 }));
    expect(fp({ a: 1, A: 2 })).not.toBe(fp({ a: 2, A: 1 }));
    expect(fp({ a: 1 })).not.toBe(fp({ A: 1 }));
  });

  it("keeps array order significant", () => {
    expect(fp({ items: [1, 2] })).not.toBe(fp({ items: [2, 1] }));
  });

  it("sorts keys by UTF-16 code units (RFC 8785 §3.2.3): the emoji sorts before U+FB33", () => {
    const text = canonicalize(RFC_SORTING_EXAMPLE) as string;
    // (Object.keys would list the integer-like key "1" first, so compare the text.)
    const expected = `{${RFC_SORTED_KEYS.map((k) => `${JSON.stringify(k)}:${JSON.stringify(RFC_SORTING_EXAMPLE[k as keyof typeof RFC_SORTING_EXAMPLE])}`).join(",")}}`;
    expect(text).toBe(expected);
    expect(text.indexOf("\ud83d\ude00")).toBeLessThan(text.indexOf("\ufb33"));
    // Shuffled insertion orders all give the same fingerprint.
    const entries = Object.entries(RFC_SORTING_EXAMPLE);
    for (let shift = 0; shift < entries.length; shift++) {
      const rotated = Object.fromEntries([...entries.slice(shift), ...entries.slice(0, shift)]);
      expect(fp(rotated)).toBe(fp(RFC_SORTING_EXAMPLE));
    }
    // A locale-aware sort would put these elsewhere: the example is sensitive to it.
    expect([...RFC_SORTED_KEYS].sort((x, y) => x.localeCompare(y))).not.toEqual(RFC_SORTED_KEYS);
  });

  it("serialises numbers as ECMAScript does (RFC 8785 §3.2.2.3)", () => {
    // RFC 8785's own example literal 333333333.33333329 parses to 333333333.3333333.
    expect(canonicalize({ n: [1e21, -0, 1.0, 0.000001, 1e-7, 333333333.3333333] })).toBe(
      '{"n":[1e+21,0,1,0.000001,1e-7,333333333.3333333]}',
    );
    expect(fp({ n: -0 })).toBe(fp({ n: 0 }));
    expect(fp({ n: 1e21 })).toBe(fp({ n: 1000000000000000000000 }));
    expect(fp({ n: 1.0 })).toBe(fp({ n: 1 }));
    expect(fp({ n: 1 })).not.toBe(fp({ n: "1" }));
  });

  it("escapes strings as RFC 8785 does (controls as \\u00xx, U+2028 raw)", () => {
    expect(canonicalize({ s: "a\u2028b\u0007c\n\u001f" })).toBe('{"s":"a\u2028b\\u0007c\\n\\u001f"}');
  });

  it("never normalises Unicode: precomposed é and e + combining accent differ", () => {
    expect(fp({ name: "caf\u00e9" })).not.toBe(fp({ name: "cafe\u0301" }));
    expect(fp({ "caf\u00e9": 1 })).not.toBe(fp({ "cafe\u0301": 1 }));
  });

  it("follows JSON for undefined: dropped from objects, null in arrays", () => {
    expect(fp({ a: 1, b: undefined })).toBe(fp({ a: 1 }));
    expect(fp([undefined])).toBe(fp([null]));
    expect(fp({ a: 1, b: null })).not.toBe(fp({ a: 1 }));
  });

  it("fingerprints a Date as its ISO string", () => {
    expect(fp({ at: new Date("2024-01-01T00:00:00Z") })).toBe(fp({ at: "2024-01-01T00:00:00.000Z" }));
  });

  it("does not merge an own '__proto__' member (from JSON.parse) with an empty object", () => {
    const withProto = JSON.parse('{"__proto__":{"admin":true}}') as JsonValue;
    expect(fp(withProto)).not.toBe(fp({}));
    expect(fp(JSON.parse('{"__proto__":1}'))).not.toBe(fp(JSON.parse('{"__proto__":2}')));
  });

  it("distinguishes values that only a careless encoding would merge", () => {
    expect(fp(["a", "b"])).not.toBe(fp(["a,b"]));
    expect(fp({ a: "1" })).not.toBe(fp({ a: 1 }));
    expect(fp(null)).not.toBe(fp({}));
    expect(fp("")).not.toBe(fp(null));
  });
});
