import { describe, expect, inject, it } from "vitest";
import type { FaultPlan } from "../src/chaos.ts";
import { runTorture } from "../src/driver.ts";
import { details, summaryLine } from "../src/report.ts";

/**
 * The bounded torture run CI makes: three worker processes, a fixed number
 * of intents and a fixed number of faults of every kind except the server
 * restart (the server may be shared; `pnpm torture` owns one and restarts
 * it). Faults are due by progress, not by the clock, so a slow machine runs
 * exactly the same work as a fast one, only slower; the timeout is there
 * for a hung run, not to measure anything. The long run is
 * `pnpm torture --long`; see docs/reliability.md.
 */
const RUNS = 150;
const FAULTS: FaultPlan = { kill: 3, armedKill: 3, terminate: 4, pause: 3, zombie: 4, storm: 4 };

describe("torture, smoke size", () => {
  it("kills, terminations, zombies and duplicate storms leave no duplicate effect and no lost intent", async () => {
    const log: string[] = [];
    const report = await runTorture({
      serverUrl: inject("serverUrl"),
      runs: RUNS,
      workers: 3,
      slots: 6,
      leaseMs: 1_200,
      faults: FAULTS,
      seed: 1 + Math.floor(Math.random() * 2 ** 31),
      log: (line) => log.push(line),
    });
    console.log(summaryLine(report));
    for (const line of details(report)) console.log(line);
    if (report.problems.length > 0 || report.chaos.zombies < FAULTS.zombie) console.log(log.join("\n"));

    expect(report.duplicateEffects).toBe(0);
    expect(report.lostIntents).toBe(0);
    expect(report.otherViolations).toBe(0);
    expect(report.problems).toEqual([]);
    // The operator scenario ran and is counted in the totals above: 0 duplicate effects, 0 lost intents.
    expect(report.operators).toMatchObject({ intents: 34, duplicateEffects: 0, lostIntents: 0, otherViolations: 0 });
    // Every intent asked for ran, and every planned fault was made.
    expect(report.runs).toBe(RUNS);
    expect(report.chaos).toMatchObject({
      killsSent: FAULTS.kill,
      killsArmed: FAULTS.armedKill,
      pauses: FAULTS.pause,
      storms: FAULTS.storm,
    });
    // Every zombie round was tried; on a loaded machine a round's intent may finish before any attempt
    // reaches the freeze point (counted as a miss), but most rounds must make their zombie.
    expect(report.chaos.zombies + report.chaos.zombieMisses).toBe(FAULTS.zombie);
    expect(report.chaos.zombies).toBeGreaterThanOrEqual(Math.ceil(FAULTS.zombie / 2));
    expect(report.chaos.terminated).toBeGreaterThanOrEqual(FAULTS.terminate);
    // The library really had to recover: every zombie round is a takeover, every storm a duplicate.
    expect(report.kills).toBeGreaterThanOrEqual(FAULTS.kill);
    expect(report.takeovers).toBeGreaterThanOrEqual(FAULTS.zombie);
    expect(report.duplicatesSeen).toBeGreaterThan(0);
  }, 600_000);
});
