import { describe, expect, it } from "vitest";
import { formatDuration, formatLease, parseDuration } from "./duration.js";

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["90s", 90_000],
    ["10m", 600_000],
    ["1h30m", 5_400_000],
    ["2d", 172_800_000],
  ])("reads %s", (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(["", "10", "m", "10 minutes", "-5m", "1.5h", "10M"])("refuses %j", (text) =>
    expect(parseDuration(text)).toBeUndefined(),
  );
});

describe("formatDuration", () => {
  it.each([
    [850, "850ms"],
    [12_400, "12s"],
    [150_000, "2m 30s"],
    [840_000, "14m"],
    [7_500_000, "2h 5m"],
    [273_600_000, "3d 4h"],
    [-840_000, "14m"],
  ])("formats %d ms as %s", (ms, text) => expect(formatDuration(ms)).toBe(text));

  it("says which side of the lease we are on", () => {
    expect(formatLease(25_000)).toBe("25s left");
    expect(formatLease(-840_000)).toBe("expired 14m ago");
    expect(formatLease(0)).toBe("expired 0ms ago");
  });
});
