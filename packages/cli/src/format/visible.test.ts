import { describe, expect, it } from "vitest";
import { visible, visibleJson } from "./visible.js";

describe("visible: keys and tenants as a terminal can tell them apart", () => {
  it("escapes what prints as nothing or as a line break, so k, k+NEL and k+LS differ", () => {
    const shown = ["k", "k\u0085", "k\u2028", "k\u2029", "k\u200b", "k\ufeff", "k\u202e"].map(visible);
    expect(shown).toEqual(["k", "k\\u0085", "k\\u2028", "k\\u2029", "k\\u200B", "k\\uFEFF", "k\\u202E"]);
    expect(new Set(shown).size).toBe(shown.length);
  });

  it("escapes C0 and C1 controls, DEL and the escape character of ANSI sequences", () => {
    expect(visible("a\u0000b\u001b[31mc\u007fd\u009f")).toBe("a\\u0000b\\u001B[31mc\\u007Fd\\u009F");
  });

  it("escapes spaces that look like ASCII space, and a space at either end", () => {
    expect(visible("a\u00a0b\u3000c")).toBe("a\\u00A0b\\u3000c");
    expect(visible(" k ")).toBe("\\u0020k\\u0020");
    expect(visible("order 1")).toBe("order 1");
  });

  it("escapes a backslash, so an escaped character never looks like one typed out", () => {
    expect(visible("k\\u0085")).toBe("k\\\\u0085");
    expect(visible("k\\u0085")).not.toBe(visible("k\u0085"));
  });

  it("leaves every printable character alone: accents, scripts, emoji", () => {
    for (const text of ["order-1001", "café", "e\u0301", "中文", "Σ", "😀", "İ", "a/b:c%_'\""]) {
      expect(visible(text)).toBe(text);
    }
  });

  it("writes characters beyond the BMP with braces", () => {
    expect(visible("k\u{e0001}")).toBe("k\\u{E0001}");
  });
});

describe("visibleJson: stored JSON as the console and keys show print it", () => {
  it("escapes what visible escapes, as JSON escapes, so the text parses back to the value", () => {
    const value = { said: "k\u202Egnp.exe", other: ["order-1\u200B", "a\u00A0b", "k\u2028", "\u{E0001}"], n: 1 };
    const text = visibleJson(value);
    expect(text).toBe(
      '{\n  "said": "k\\u202Egnp.exe",\n  "other": [\n    "order-1\\u200B",\n    "a\\u00A0b",\n    "k\\u2028",\n    "\\uDB40\\uDC01"\n  ],\n  "n": 1\n}',
    );
    expect(JSON.parse(text)).toEqual(value);
  });

  it("leaves backslashes, controls and printable text as JSON writes them", () => {
    const value = { path: "a\\b", line: "x\ny\u0000", text: "café 😀" };
    expect(visibleJson(value, 0)).toBe(JSON.stringify(value));
    expect(visibleJson(undefined)).toBe("null");
  });
});
