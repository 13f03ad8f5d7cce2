import { InvalidIdempotencyKeyError } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { parseIdempotencyKey } from "./idempotency-key.js";

describe("input validation: parseIdempotencyKey", () => {
  it("returns undefined when the header is absent", () => {
    expect(parseIdempotencyKey([])).toBeUndefined();
  });

  it.each([
    ["bare", "k-123", "k-123"],
    ["quoted", '"k-123"', "k-123"],
    ["quoted with escapes", '"a\\"b\\\\c"', 'a"b\\c'],
    ["a quoted comma", '"a,b"', "a,b"],
    ["quoted spaces kept", '" a "', " a "],
    ["case kept", "AbC", "AbC"],
    ["255 characters", "k".repeat(255), "k".repeat(255)],
    ["255 quoted characters", `"${"k".repeat(255)}"`, "k".repeat(255)],
  ])("reads the %s form", (_what, header, key) => {
    expect(parseIdempotencyKey([header])).toBe(key);
  });

  it.each([
    ["empty", [""], /empty/],
    ["quoted empty", ['""'], /empty/],
    ["quoted blank", ['"  "'], /whitespace/],
    ["a control character", ["a\u0001b"], /printable ASCII/],
    ["a tab", ["a\tb"], /printable ASCII/],
    ["DEL", ["a\u007fb"], /printable ASCII/],
    ["non-ASCII", ["caf\u00e9"], /printable ASCII/],
    ["256 characters", ["k".repeat(256)], /255/],
    ["256 quoted characters", [`"${"k".repeat(256)}"`], /255/],
    ["100 000 characters", ["k".repeat(100_000)], /255/],
    ["two lines", ["a", "b"], /2 times/],
    ["comma-joined", ["a, b"], /several/],
    ["a list", ['"a", "b"'], /several/],
    ["parameters", ['"a";x=1'], /parameters/],
    ["an unterminated string", ['"abc'], /closing quote/],
    ["a bad escape", ['"a\\nb"'], /escaped/],
    ["text after the string", ['"a"b'], /closing quote|malformed/],
  ])("refuses %s with InvalidIdempotencyKeyError (400) that does not echo the value", (_what, lines, message) => {
    let error: unknown;
    try {
      parseIdempotencyKey(lines);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidIdempotencyKeyError);
    expect((error as InvalidIdempotencyKeyError).httpStatus).toBe(400);
    expect((error as Error).message).toMatch(message);
    for (const line of lines) if (line.length > 3) expect((error as Error).message).not.toContain(line);
  });
});
