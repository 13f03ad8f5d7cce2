import { describe, expect, inject, it } from "vitest";
import { runTorture } from "../src/driver.ts";
import { details, summaryLine } from "../src/report.ts";

/**
 * The bounded torture run CI makes: three worker processes, a few hundred
 * intents, every kind of fault except the server restart (the server may be
 * shared; `pnpm torture` owns one and restarts it). The long run is
 * `pnpm torture --long`; see docs/reliability.md.
 */
describe("torture, smoke size", () => {
  it("kills, terminations, zombies and duplicate storms leave no duplicate effect and no lost intent", async () => {
    const log: string[] = [];
    const report = await runTorture({
      serverUrl: inject("serverUrl"),
      runs: 400,
      workers: 3,
      slots: 6,
      leaseMs: 1_200,
      chaosIntervalMs: 300,
      // On a busy CI machine stop minting early rather than overrun the 90 s this test may take.
      budgetMs: 55_000,
      seed: 1 + Math.floor(Math.random() * 2 ** 31),
      log: (line) => log.push(line),
    });
    console.log(summaryLine(report));
    for (const line of details(report)) console.log(line);
    if (report.problems.length > 0) console.log(log.join("\n"));

    expect(report.duplicateEffects).toBe(0);
    expect(report.lostIntents).toBe(0);
    expect(report.otherViolations).toBe(0);
    expect(report.problems).toEqual([]);
    // A run cut short by a slow machine still checks what it ran, but it must have run something real.
    expect(report.runs).toBeGreaterThanOrEqual(200);
    // The faults really happened, and the library really had to recover from them.
    expect(report.kills).toBeGreaterThan(0);
    expect(report.chaos.terminated).toBeGreaterThan(0);
    expect(report.chaos.pauses).toBeGreaterThan(0);
    expect(report.chaos.storms).toBeGreaterThan(0);
    expect(report.takeovers).toBeGreaterThan(0);
    expect(report.duplicatesSeen).toBeGreaterThan(0);
  }, 180_000);
});
