import { describe, expect, inject, it } from "vitest";
import { durablePassed, durableSummaryLine } from "../src/scenarios/durable-report.ts";
import { runDurable } from "../src/scenarios/durable-waits.ts";

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
 * caller's transaction, and clients retry half the keys meanwhile. Each
 * run enqueues an outbox message that the workers' relays deliver to a
 * webhook receiver counting by delivery key; an operator rewinds four
 * waiting runs to the phase that sent it (two with `resendOutbox`). Then
 * four runs with a one-second retention are completed, expired and swept
 * while their keys are retried and their confirmations repeated. The
 * report must show no duplicate effect (in the ledger, at the receiver,
 * or a retry after retention run again), no lost intent, and every
 * signal stored and merged exactly once. Bounded by counts; the scenario's only
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
      retries: 4,
      retained: 4,
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
      // Two rewinds to `notify` without resendOutbox, two with it: those two messages, and only they, got a new key.
      retriedFrom: { plain: 2, resend: 2 },
      outbox: { messages: 24 + 4, intendedResends: 2 },
      retention: { intents: 4, reExecutions: 0 },
    });
    // Every message arrived under each of its keys at least once.
    expect(report.outbox.deliveries).toBeGreaterThanOrEqual(24 + 4 + 2);
    // After its tombstone was in, each retained key was refused once by runOnce and once by enqueue,
    // and its repeated confirmation was acknowledged as expired.
    expect(report.retention.keyExpired).toBeGreaterThanOrEqual(4 * 2);
    expect(report.retention.expiredSignals).toBeGreaterThanOrEqual(4);
    // Every delivery was made, and all but one per intent counted as the same signal again.
    expect(report.signalsSent).toBe(24 * 3 + 4 + 4 + 4);
    // Every unusable signal was refused, except other-version repeats of a confirmation already in.
    expect(report.unusableRefused + (report.duplicateSignals - (24 * 3 - 24))).toBe(4 + 4);
    expect(report.duplicateSignals).toBeGreaterThanOrEqual(24 * 3 - 24);
    expect(durablePassed(report)).toBe(true);
  }, 600_000);
});
