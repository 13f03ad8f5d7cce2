import { describe, expect, it } from "vitest";
import { colourEnabled, painter } from "./colour.js";

describe("colourEnabled", () => {
  it("colours a TTY", () => expect(colourEnabled({ isTTY: true }, {})).toBe(true));
  it("never colours a pipe unless forced", () => {
    expect(colourEnabled({ isTTY: false }, {})).toBe(false);
    expect(colourEnabled({}, { FORCE_COLOR: "1" })).toBe(true);
    expect(colourEnabled({}, { FORCE_COLOR: "0" })).toBe(false);
  });
  it("NO_COLOR wins over a TTY and over FORCE_COLOR", () => {
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: "1", FORCE_COLOR: "1" })).toBe(false);
  });
  it("a dumb terminal gets no colour", () => expect(colourEnabled({ isTTY: true }, { TERM: "dumb" })).toBe(false));
});

describe("painter", () => {
  it("is the identity when off and wraps in ANSI codes when on", () => {
    expect(painter(false)("red", "x")).toBe("x");
    expect(painter(true)("red", "x")).toBe("\u001b[31mx\u001b[39m");
  });
});
