import { Cron } from "croner";
import { describe, expect, it } from "vitest";
import { InvalidOptionError } from "../../errors.js";
import { canonicalZone, cronOf, MAX_CAUGHT_UP, planTicks, TICKS_PER_ROUND } from "./ticks.js";

const iso = (dates: readonly Date[]) => dates.map((d) => d.toISOString());
const at = (s: string) => new Date(s);

/** Every tick of `rule` in `[from, to]`, walked one by one from croner. */
function ticksBetween(rule: Cron, from: Date, to: Date): Date[] {
  const out: Date[] = [];
  for (let t = rule.nextRun(new Date(from.getTime() - 1)); t !== null && t <= to; t = rule.nextRun(t)) out.push(t);
  return out;
}

describe("a schedule in Europe/Berlin across both daylight-saving changes", () => {
  /**
   * The ticks one round fires for `cron` in Berlin, from `next` up to `now`,
   * every one on time; checked first against the same ticks walked one by one
   * with croner itself.
   */
  const berlin = (cron: string, next: string, now: string) => {
    const fired = iso(
      planTicks(cronOf("test", cron, "Europe/Berlin"), {
        next: at(next),
        now: at(now),
        graceMs: 10 * 24 * 3600_000,
        catchUp: "all",
      }).fire,
    );
    expect(fired).toEqual(iso(ticksBetween(new Cron(cron, { timezone: "Europe/Berlin" }), at(next), at(now))));
    return fired;
  };

  // 2026: clocks go forward on 29 March at 02:00 CET (to 03:00 CEST), back on 25 October at 03:00 CEST (to 02:00 CET).
  it("a fixed time in the spring gap (02:30) ticks once that day, at 03:00 CEST, as croner computes", () => {
    expect(berlin("30 2 * * *", "2026-03-27T01:30:00Z", "2026-03-31T12:00:00Z")).toEqual([
      "2026-03-27T01:30:00.000Z", // 02:30 CET
      "2026-03-28T01:30:00.000Z",
      "2026-03-29T01:00:00.000Z", // 02:30 does not exist: the first valid time after the gap, 03:00 CEST
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
      "2026-03-31T00:30:00.000Z",
    ]);
  });

  it("a fixed time in the repeated autumn hour (02:30) ticks once, at its first occurrence", () => {
    expect(berlin("30 2 * * *", "2026-10-24T00:30:00Z", "2026-10-26T12:00:00Z")).toEqual([
      "2026-10-24T00:30:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-26T01:30:00.000Z",
    ]);
  });

  it("an interval (every 30 minutes) skips the spring gap's times and ticks in both passes of the autumn hour", () => {
    // Spring: local 01:30 CET, then 03:00 CEST; 02:00 and 02:30 do not exist.
    expect(berlin("*/30 * * * *", "2026-03-29T00:00:00Z", "2026-03-29T01:30:00Z")).toEqual([
      "2026-03-29T00:00:00.000Z",
      "2026-03-29T00:30:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-29T01:30:00.000Z",
    ]);
    // Autumn: local 02:00 and 02:30 happen twice (CEST, then CET), four ticks in the two hours.
    expect(berlin("*/30 * * * *", "2026-10-25T00:00:00Z", "2026-10-25T01:30:00Z")).toEqual([
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-25T01:00:00.000Z",
      "2026-10-25T01:30:00.000Z",
    ]);
  });
});

describe("planTicks: which due ticks a round fires", () => {
  const everySecond = cronOf("test", "* * * * * *", "UTC");
  const base = at("2026-01-01T00:00:00Z");
  const plus = (s: number) => new Date(base.getTime() + s * 1000);

  it("fires every on-time tick, the one due at this very moment included, and waits for the one after now", () => {
    const p = planTicks(everySecond, { next: plus(0), now: plus(3), graceMs: 5_000, catchUp: "none" });
    expect(iso(p.fire)).toEqual(iso([plus(0), plus(1), plus(2), plus(3)]));
    expect(p.next?.toISOString()).toBe(plus(4).toISOString());
  });

  it("nothing due yet: fires nothing and keeps the next tick", () => {
    const p = planTicks(everySecond, { next: plus(5), now: plus(3), graceMs: 5_000, catchUp: "all" });
    expect(p.fire).toEqual([]);
    expect(p.next?.toISOString()).toBe(plus(4).toISOString());
  });

  it.each([
    ["none", [] as number[]],
    ["latest", [49]],
    ["all", Array.from({ length: 50 }, (_, i) => i)],
  ] as const)("missed ticks (older than graceMs) with catchUp '%s'", (catchUp, missed) => {
    // The workers stopped before tick 0 and came back at 60 s; a tick older than 10 s is missed.
    const p = planTicks(everySecond, { next: plus(0), now: plus(60), graceMs: 10_000, catchUp });
    const onTime = Array.from({ length: 11 }, (_, i) => 50 + i); // 50..60: now - tick <= 10 s
    expect(iso(p.fire)).toEqual(iso([...missed, ...onTime].map(plus)));
    expect(p.next?.toISOString()).toBe(plus(61).toISOString());
  });

  it("a long outage with 'all': at most the MAX_CAUGHT_UP most recent missed ticks, TICKS_PER_ROUND per round", () => {
    const next = plus(0);
    const now = plus(5_000);
    const state = { now, graceMs: 0, catchUp: "all" as const };
    const first = planTicks(everySecond, { ...state, next });
    expect(first.fire).toHaveLength(TICKS_PER_ROUND);
    const oldestKept = 5_000 - MAX_CAUGHT_UP; // ticks 4000..4999 are missed and kept, 5000 is on time
    expect(first.fire[0]?.toISOString()).toBe(plus(oldestKept).toISOString());
    // Round after round, from where the last one stopped, until every kept tick was fired once.
    const fired: Date[] = [...first.fire];
    let n: Date | null = first.next;
    while (n !== null && n <= now) {
      const p = planTicks(everySecond, { ...state, next: n });
      fired.push(...p.fire);
      n = p.next;
    }
    expect(iso(fired)).toEqual(iso(Array.from({ length: MAX_CAUGHT_UP + 1 }, (_, i) => plus(oldestKept + i))));
    expect(n?.toISOString()).toBe(plus(5_001).toISOString());
  });
});

describe("cron and time zone checks", () => {
  it.each(["", "bad", "61 * * * *", "* * * * * * *", "0 0 31 2 *"])("refuses cron %j", (cron) => {
    expect(() => cronOf("schedule 'x'", cron, "UTC")).toThrow(InvalidOptionError);
    try {
      cronOf("schedule 'x'", cron, "UTC");
    } catch (error) {
      expect((error as InvalidOptionError).option).toBe("cron");
      expect((error as InvalidOptionError).code).toBe("invalid_option");
    }
  });

  it("refuses an unknown zone and canonicalises a known one", () => {
    expect(() => canonicalZone("schedule 'x'", "Mars/Olympus")).toThrow(/not an IANA time zone/);
    expect(() => canonicalZone("schedule 'x'", 7)).toThrow(InvalidOptionError);
    expect(canonicalZone("schedule 'x'", "utc")).toBe("UTC");
    expect(canonicalZone("schedule 'x'", "Europe/Berlin")).toBe("Europe/Berlin");
  });
});
