import { describe, expect, it } from "vitest";
import { hasLoneSurrogate, toJsonValue } from "./json-value.js";

function rejected(value: unknown) {
  const r = toJsonValue(value);
  if (r.ok) throw new Error(`expected a rejection, got ${JSON.stringify(r.value)}`);
  return r.issues;
}

function accepted(value: unknown) {
  const r = toJsonValue(value);
  if (!r.ok) throw new Error(`expected acceptance, got ${JSON.stringify(r.issues)}`);
  return r.value;
}

function isDeepFrozen(v: unknown): boolean {
  if (v === null || typeof v !== "object") return true;
  return Object.isFrozen(v) && Object.values(v).every(isDeepFrozen);
}

class Money {
  constructor(readonly cents: number) {}
}
class Secret {
  #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal() {
    return this.#value;
  }
}

describe("serialization: toJsonValue refuses values JSON cannot represent faithfully, naming the path", () => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const cyclicArray: unknown[] = [1];
  cyclicArray.push(cyclicArray);

  it.each([
    ["BigInt", { amount: 10n }, "$.amount", /BigInt/],
    ["NaN", { amount: Number.NaN }, "$.amount", /NaN/],
    ["Infinity", { amount: Number.POSITIVE_INFINITY }, "$.amount", /Infinity/],
    ["-Infinity", { amount: Number.NEGATIVE_INFINITY }, "$.amount", /Infinity/],
    ["function", { cb: () => 1 }, "$.cb", /function/],
    ["symbol", { s: Symbol("x") }, "$.s", /symbol/],
    ["cyclic object", cyclic, "$.self", /cyclic/],
    ["cyclic array", cyclicArray, "$[1]", /cyclic/],
    ["Map", { tags: new Map([["a", 1]]) }, "$.tags", /Map/],
    ["Set", { tags: new Set(["a"]) }, "$.tags", /Set/],
    ["class instance", { price: new Money(5) }, "$.price", /Money/],
    ["class with only #private fields", { secret: new Secret("s") }, "$.secret", /Secret/],
    ["invalid Date", { at: new Date("nope") }, "$.at", /invalid Date/],
    ["Uint8Array", { bytes: new Uint8Array([1]) }, "$.bytes", /Uint8Array/],
    ["boxed String", { s: new String("a") }, "$.s", /String/],
    ["lone high surrogate", { s: "\ud800" }, "$.s", /surrogate/],
    ["lone low surrogate", { s: "x\udc00y" }, "$.s", /surrogate/],
    ["a bare undefined", undefined, "$", /undefined/],
  ])("%s", (_kind, value, path, message) => {
    const issues = rejected(value);
    expect(issues).toContainEqual({ path, message: expect.stringMatching(message) });
  });

  it("names nested paths through arrays and objects", () => {
    expect(
      rejected({
        items: [
          { sku: "a", qty: 1 },
          { sku: "b", qty: 2n },
        ],
      }),
    ).toEqual([{ path: "$.items[1].qty", message: expect.stringMatching(/BigInt/) }]);
  });

  it("names keys that are not identifiers unambiguously", () => {
    const [issue] = rejected({ "a b": { "1x": Number.NaN } });
    expect(issue?.path).toBe('$."a b"."1x"');
  });

  it("refuses a key that holds a lone surrogate", () => {
    const [issue] = rejected({ "k\udbff": 1 });
    expect(issue?.message).toMatch(/key.*surrogate/);
  });

  it("refuses nesting deeper than 512 levels instead of overflowing the stack", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 600; i++) deep = { d: deep };
    expect(rejected(deep)[0]?.message).toMatch(/deeper than 512/);
    let ok: unknown = 1;
    for (let i = 0; i < 500; i++) ok = [ok];
    expect(toJsonValue(ok).ok).toBe(true);
  });

  it("reports every problem found, up to ten", () => {
    const many = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, BigInt(i)]));
    const issues = rejected(many);
    expect(issues).toHaveLength(10);
    expect(issues[0]?.path).toBe("$.k0");
  });

  it("never throws a bare TypeError for the values JSON.stringify chokes on", () => {
    for (const v of [10n, { a: 10n }, cyclic]) {
      expect(() => JSON.stringify(v)).toThrow(TypeError);
      expect(() => toJsonValue(v)).not.toThrow();
    }
  });
});

describe("serialization: toJsonValue follows JSON where JSON is lossless", () => {
  it("turns a Date into its ISO string", () => {
    expect(accepted({ at: new Date("2024-01-01T00:00:00Z") })).toEqual({ at: "2024-01-01T00:00:00.000Z" });
  });

  it("drops undefined object members, as JSON does", () => {
    expect(accepted({ a: 1, b: undefined })).toEqual({ a: 1 });
    expect(Object.keys(accepted({ a: 1, b: undefined }) as object)).toEqual(["a"]);
  });

  it("turns undefined and holes in arrays into null, as JSON does", () => {
    expect(accepted([undefined])).toEqual([null]);
    // biome-ignore lint/suspicious/noSparseArray: a hole is the point
    expect(accepted([1, , 3])).toEqual([1, null, 3]);
  });

  it("normalises -0 to 0, at any depth", () => {
    expect(Object.is(accepted(-0), 0)).toBe(true);
    const v = accepted({ n: [-0] }) as { n: number[] };
    expect(Object.is(v.n[0], 0)).toBe(true);
  });

  it("keeps large and tiny numbers as the same JS number", () => {
    expect(accepted({ n: 1e21 })).toEqual({ n: 1000000000000000000000 });
    expect(accepted({ n: 5e-324 })).toEqual({ n: 5e-324 });
  });

  it("accepts strings JSON must escape (controls, U+2028) and keeps them verbatim, never normalised", () => {
    const s = "a\u2028b\u0007c\u0000";
    expect(accepted({ s })).toEqual({ s });
    expect(accepted({ s: "cafe\u0301" })).toEqual({ s: "cafe\u0301" });
    expect(accepted({ s: "caf\u00e9" })).not.toEqual({ s: "cafe\u0301" });
  });

  it("accepts a well-formed surrogate pair", () => {
    expect(accepted({ e: "\ud83d\ude00" })).toEqual({ e: "😀" });
  });

  it("accepts null-prototype objects and shared (non-cyclic) references", () => {
    const bare = Object.assign(Object.create(null) as object, { x: 1 });
    const shared = { v: 1 };
    expect(accepted({ bare, a: shared, b: shared })).toEqual({ bare: { x: 1 }, a: { v: 1 }, b: { v: 1 } });
  });

  it("keeps an own '__proto__' member (as JSON.parse creates it) as data, not as the prototype", () => {
    // JSON.parse makes "__proto__" an ordinary own key. Copying it with
    // `out[k] = v` instead invokes the __proto__ setter: the member vanishes
    // from the copy (so its fingerprint equals `{}`'s) and its value becomes
    // the prototype, visible to workflow code through inheritance.
    const parsed = JSON.parse('{"__proto__":{"admin":true},"x":1}') as object;
    const v = accepted(parsed) as Record<string, unknown>;
    expect(Object.keys(v)).toEqual(["__proto__", "x"]);
    expect(JSON.stringify(v)).toBe('{"__proto__":{"admin":true},"x":1}');
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(v.admin).toBeUndefined();
  });
});

describe("serialization: toJsonValue returns a frozen copy", () => {
  it("deep-freezes the result and never touches the caller's value", () => {
    const input = { a: { b: [1, { c: 2 }] }, at: new Date(0) };
    const v = accepted(input);
    expect(isDeepFrozen(v)).toBe(true);
    expect(v).not.toBe(input);
    expect(Object.isFrozen(input)).toBe(false);
    expect(Object.isFrozen(input.a.b)).toBe(false);
    input.a.b.push(3);
    expect(v).toEqual({ a: { b: [1, { c: 2 }] }, at: "1970-01-01T00:00:00.000Z" });
  });
});

describe("hasLoneSurrogate", () => {
  it.each([
    ["", false],
    ["plain", false],
    ["\ud83d\ude00", false],
    ["\ud800", true],
    ["\udc00", true],
    ["\ude00\ud83d", true],
    ["a\ud83d", true],
  ])("%j -> %s", (s, expected) => {
    expect(hasLoneSurrogate(s)).toBe(expected);
  });
});

describe("objects with toJSON: followed as JSON.stringify follows them", () => {
  class Decimal {
    constructor(readonly digits: string) {}
    toJSON() {
      return this.digits;
    }
  }

  it("calls toJSON on a plain object instead of refusing it as a function member", () => {
    const value = { t: { toJSON: () => ({ at: "noon" }) } };
    expect(accepted(value)).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it("calls toJSON on a class instance, with the member name or index as its argument", () => {
    const seen: string[] = [];
    const probe = {
      toJSON(key: string) {
        seen.push(key);
        return key;
      },
    };
    expect(accepted({ price: new Decimal("10.50"), list: [probe], probe })).toEqual({
      price: "10.50",
      list: ["0"],
      probe: "probe",
    });
    expect(seen).toEqual(["0", "probe"]);
    // The root value gets the empty key, as JSON.stringify passes it.
    expect(accepted(probe)).toBe("");
  });

  it("checks what toJSON returns by the same rules, naming the path and toJSON", () => {
    const [issue] = rejected({ t: { toJSON: () => ({ n: 10n }) } });
    expect(issue).toEqual({ path: "$.t.n", message: expect.stringMatching(/BigInt.*\(returned by toJSON\)/) });
  });

  it("calls toJSON once per value, as JSON does: a toJSON that returns itself is not a loop", () => {
    const self = {
      toJSON() {
        return self;
      },
    };
    const [issue] = rejected({ self });
    expect(issue?.path).toBe("$.self.toJSON");
    expect(issue?.message).toMatch(/function/);
  });

  it("reports a toJSON that throws with its message", () => {
    const [issue] = rejected({
      t: {
        toJSON() {
          throw new Error("not ready");
        },
      },
    });
    expect(issue).toEqual({ path: "$.t", message: "toJSON() threw: not ready" });
  });
});

describe("paths of very deep values are shortened", () => {
  it("prints both ends of a deep path and counts the levels left out", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 2000; i++) deep = [deep];
    const [issue] = rejected(deep);
    expect(issue?.message).toMatch(/deeper than 512/);
    expect(issue?.path).toMatch(/^\$\[0\]\[0\]\[0\]\[0\]…\(\d+ levels\)…\[0\]\[0\]$/);
    expect(issue?.path.length).toBeLessThan(60);
  });

  it("keeps paths of ordinary depth whole", () => {
    const [issue] = rejected({ a: { b: { c: [{ d: 1n }] } } });
    expect(issue?.path).toBe("$.a.b.c[0].d");
  });
});
