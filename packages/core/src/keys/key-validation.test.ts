import { describe, expect, it } from "vitest";
import { IdempoError, InvalidIdempotencyKeyError } from "../errors.js";
import { assertValidKey, MAX_KEY_BYTES } from "./key-validation.js";

function refusal(value: unknown, what = "idempotency key"): InvalidIdempotencyKeyError {
  try {
    assertValidKey(value, what);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidIdempotencyKeyError);
    expect(error).toBeInstanceOf(IdempoError);
    expect(error).toMatchObject({ code: "invalid_key", httpStatus: 400 });
    return error as InvalidIdempotencyKeyError;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

const accepts = (value: string) => expect(() => assertValidKey(value, "idempotency key")).not.toThrow();

describe("input validation: assertValidKey", () => {
  it("limits keys to 255 UTF-8 bytes", () => {
    expect(MAX_KEY_BYTES).toBe(255);
  });

  it.each([
    ["undefined", undefined, /must be a string, got undefined/],
    ["null", null, /must be a string, got null/],
    ["a number", 42, /must be a string, got number/],
    ["an object", { key: "k" }, /must be a string, got object/],
    ["an array", ["k"], /must be a string/],
    ["a String object", new String("k"), /must be a string/],
    ["the empty string", "", /must not be empty/],
    ["a single space", " ", /whitespace/],
    ["only spaces", "     ", /whitespace/],
    ["only non-breaking and ideographic spaces", "\u00a0\u3000\u2003", /whitespace/],
  ])("refuses %s", (_what, value, message) => {
    expect(refusal(value).message).toMatch(message);
  });

  it("names the field it checked", () => {
    expect(refusal("", "tenant id").message).toMatch(/^tenant id /);
    expect(refusal("", "idempotency key").message).toMatch(/^idempotency key /);
  });

  it.each([...Array.from({ length: 0x20 }, (_, c) => c), ...Array.from({ length: 0x21 }, (_, c) => 0x7f + c)])(
    "refuses control character (code point %i, category Cc: C0, DEL and C1) anywhere in the value",
    (code) => {
      const ch = String.fromCharCode(code);
      for (const v of [`${ch}abc`, `ab${ch}c`, `abc${ch}`]) {
        const error = refusal(v);
        expect(error.message).toMatch(/control characters/);
        // The message never echoes the raw value (no CR/LF injected into logs).
        expect(error.message).not.toContain(ch);
      }
    },
  );

  it("accepts the characters around the Cc ranges and the separators that are not Cc (U+00A0, U+2028, U+2029)", () => {
    accepts("a\u00a0b");
    accepts("a\u2028b");
    accepts("a\u2029b");
    accepts("a\u007eb");
  });

  it("accepts exactly 255 ASCII bytes and refuses 256", () => {
    accepts("k".repeat(255));
    expect(refusal("k".repeat(256)).message).toMatch(/255 UTF-8 bytes/);
  });

  it.each([
    ["2-byte é", "\u00e9", 2],
    ["3-byte €", "\u20ac", 3],
    ["4-byte emoji (a surrogate pair)", "\ud83d\ude00", 4],
  ])("counts UTF-8 bytes, not characters or UTF-16 units: %s", (_what, ch, bytes) => {
    const fit = Math.floor(255 / bytes);
    accepts(ch.repeat(fit));
    refusal(ch.repeat(fit + 1));
  });

  it("refuses 255 emoji (255 characters, 510 UTF-16 units, 1020 UTF-8 bytes): the limit is bytes", () => {
    const key = "\ud83d\ude00".repeat(255);
    expect([...key]).toHaveLength(255);
    expect(refusal(key).message).toMatch(/255 UTF-8 bytes/);
  });

  it("refuses a 100 000-character value quickly", () => {
    const huge = "x".repeat(100_000);
    const started = performance.now();
    for (let i = 0; i < 100; i++) refusal(huge);
    expect(performance.now() - started).toBeLessThan(200);
  });

  it("is case-sensitive and never trims: such values are accepted as they are", () => {
    for (const v of ["abc", "ABC", " abc", "abc ", " abc ", "a b"]) accepts(v);
  });

  it("refuses a lone surrogate, which PostgreSQL text would turn into U+FFFD", () => {
    expect(refusal("k\ud800").message).toMatch(/surrogate/);
    expect(refusal("\udc00k").message).toMatch(/surrogate/);
    accepts("k\ud83d\ude00");
  });

  it("accepts typical keys", () => {
    for (const v of ["k1", "01HZXK7Q3J7ZQ4N4R9G8Y5T6W2", "order:2024-01-01/42", "ключ", "鍵", "\ud83d\udd11"])
      accepts(v);
  });
});
