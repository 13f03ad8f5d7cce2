import { describe, expect, inject, it } from "vitest";
import { runFanout } from "../src/scenarios/fanout.ts";
import { fanoutPassed, fanoutSummaryLine } from "../src/scenarios/fanout-report.ts";

/**
 * The fan-out scenario in its short form, as CI runs it: payout batches
 * whose `.parallel` checks and fee run under a per-merchant concurrency
 * limit and a rate limit shared by three worker processes, fanning out 20
 * transfers each under a per-seller limit (1, 2 or 3 at once per key),
 * while workers are SIGKILLed as the batches fan out and as the transfers
 * complete. A sampler reads the slot table and the workflow code's own
 * marks every few milliseconds. The report must show each child exactly
 * once, no limit ever exceeded, no stretch over the rate limit, no
 * duplicate effect and no lost intent. Bounded by counts; the long form is
 * `pnpm torture --fanout-parents 30` (docs/reliability.md).
 */
describe("torture: fan-out under concurrency and rate limits", () => {
  it("each child once, no limit exceeded, 0 duplicate effects, 0 lost intents, through worker kills", async () => {
    const lines: string[] = [];
    const report = await runFanout({
      serverUrl: inject("serverUrl"),
      parents: 12,
      transfers: 20,
      workers: 3,
      fanOutKills: 3,
      fanInKills: 3,
      leaseMs: 1_500,
      mode: "map",
      seed: 20261202,
      log: (line) => lines.push(line),
    });
    console.log(fanoutSummaryLine(report));
    if (!fanoutPassed(report)) console.log([...lines, ...report.problems.slice(0, 20)].join("\n"));
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({
      parents: 12,
      children: 12 * 20,
      kills: { fanOut: 3, fanIn: 3 },
      limitsExceeded: 0,
      duplicateEffects: 0,
      lostIntents: 0,
      otherViolations: 0,
    });
    expect(report.rateExcess).toBeLessThanOrEqual(0);
    // The sampler really ran, and saw every pair's keys held, some of them up to their limit.
    expect(report.samples).toBeGreaterThan(100);
    expect(report.peaks.every((p) => p.slots >= 1)).toBe(true);
    expect(report.peaks.some((p) => p.max > 1 && p.slots === p.max)).toBe(true);
    expect(report.rateLimitedCalls).toBeGreaterThanOrEqual(12 + 12 * 20);
    expect(fanoutPassed(report)).toBe(true);
  }, 600_000);
});
