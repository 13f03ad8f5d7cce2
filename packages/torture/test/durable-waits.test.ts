import { describe, expect, inject, it } from "vitest";
import { durablePassed, durableSummaryLine, runDurable } from "../src/scenarios/durable-waits.ts";

/**
 * Sleeping and signalled runs under chaos: worker processes running
 * `startWorker` are SIGKILLed and replaced while runs sleep and wait (once
 * all of them at the same time), the
 * provider's confirmation is delivered three times per intent from racing
 * connections (before, during and after each run reaches its wait), a few
 * conflicting confirmations are sent, a few confirmations with a payload
 * that fails the wait's schema and a few from a process that knows only
 * another version of the workflow are sent (each must be refused, never
 * acknowledged-but-unusable), some enqueues roll back with their
 * caller's transaction, and clients retry half the keys meanwhile. The
 * report must show no duplicate effect, no lost intent, and every signal
 * stored and merged exactly once. Bounded by counts; the scenario's only
 * clock is a generous timeout for the runs to finish after the chaos.
 */
describe("torture: durable sleeps, waits and signals", () => {
  it("0 duplicate effects, 0 lost intents, every signal delivered once, through worker kills", async () => {
    const lines: string[] = [];
    const report = await runDurable({
      serverUrl: inject("serverUrl"),
      intents: 24,
      workers: 3,
      kills: 6,
      killAllOnce: true,
      deliveries: 3,
      conflicts: 4,
      invalidSignals: 4,
      foreignSignals: 4,
      rolledBack: 3,
      leaseMs: 1_000,
      maxSleepMs: 1_500,
      seed: 20261201,
      log: (line) => lines.push(line),
    });
    const summary = durableSummaryLine(report);
    console.log(summary);
    if (!durablePassed(report)) console.log([...lines, ...report.problems.slice(0, 20)].join("\n"));
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({
      intents: 24,
      kills: 6 + 3,
      duplicateEffects: 0,
      lostIntents: 0,
      signalsNotOnce: 0,
      otherViolations: 0,
      conflictsRefused: 4,
      acknowledgedUnusable: 0,
    });
    // Every delivery was made, and all but one per intent counted as the same signal again.
    expect(report.signalsSent).toBe(24 * 3 + 4 + 4 + 4);
    // Every unusable signal was refused, except other-version repeats of a confirmation already in.
    expect(report.unusableRefused + (report.duplicateSignals - (24 * 3 - 24))).toBe(4 + 4);
    expect(report.duplicateSignals).toBeGreaterThanOrEqual(24 * 3 - 24);
    expect(durablePassed(report)).toBe(true);
  }, 600_000);
});
