import { describe, expect, it } from "vitest";
import { rateExcess } from "./rate-check.ts";

describe("rateExcess", () => {
  it("holds for calls spaced at the rate after a burst", () => {
    const times = [0, 0, 0, 0, ...Array.from({ length: 40 }, (_, i) => 100 + i * 25)];
    expect(rateExcess(times, 40, 4, 0)).toBeLessThanOrEqual(0);
  });

  it("finds three buckets' worth of calls in the time of one", () => {
    const times = Array.from({ length: 120 }, (_, i) => (i * 25) / 3);
    expect(rateExcess(times, 40, 4, 250)).toBeGreaterThan(40);
  });

  it("finds a burst larger than the bucket's in the middle of a quiet stretch", () => {
    const times = [...Array.from({ length: 10 }, (_, i) => i * 100), 1_000, 1_000, 1_000, 1_000, 1_000, 1_000];
    expect(rateExcess(times, 10, 4, 0)).toBeGreaterThan(0);
    expect(rateExcess(times, 10, 6, 0)).toBeLessThanOrEqual(0);
  });
});
