import { decodeTime, isValid } from "ulid";
import { describe, expect, it } from "vitest";
import { newId } from "./ids.js";

describe("newId", () => {
  it("mints valid, time-ordered ULIDs", () => {
    const before = Date.now();
    const id = newId();
    expect(isValid(id)).toBe(true);
    expect(decodeTime(id)).toBeGreaterThanOrEqual(before);
    expect(decodeTime(id)).toBeLessThanOrEqual(Date.now());
  });

  it("never repeats across many pool refills", () => {
    const ids = new Set(Array.from({ length: 50_000 }, () => newId()));
    expect(ids.size).toBe(50_000);
  });

  it("spreads the random part over the whole alphabet", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2_000; i++) for (const c of newId().slice(10)) seen.add(c);
    expect(seen.size).toBe(32);
  });
});
