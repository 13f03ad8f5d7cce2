import { describe, expect, it } from "vitest";
import type { Report } from "./report.ts";
import { details, passed, summaryLine } from "./report.ts";

const report: Report = {
  runs: 10_000,
  target: 10_000,
  kills: 212,
  takeovers: 1_290,
  fenced: 37,
  refusedByConstraint: 4,
  duplicatesSeen: 8_123,
  duplicateEffects: 0,
  lostIntents: 0,
  otherViolations: 0,
  chaos: {
    killsSent: 120,
    killsArmed: 100,
    terminated: 180,
    pauses: 41,
    zombies: 12,
    zombieMisses: 0,
    storms: 60,
    restarts: 1,
    primaryKills: 0,
    switchovers: 0,
  },
  resumedAtEnd: 52,
  retriedAtEnd: 3,
  providerCalls: 0,
  providerOperations: 0,
  deliveries: 0,
  messages: 0,
  clientErrors: { inProgress: 0, leaseLost: 0, unavailable: 0, inDoubt: 0, providerUnavailable: 0 },
  unexpected: [],
  problems: [],
  seconds: 612,
  database: "idempo_torture_x",
};

describe("the summary line", () => {
  it("names every figure the docs quote, in order", () => {
    expect(summaryLine(report)).toBe(
      "torture: runs 10000, kills 212, takeovers 1290, zombie writes fenced 37, duplicates seen by clients 8123, " +
        "duplicate effects 0, lost intents 0 (other violations 0; backends terminated 180, pauses 41, storms 60, " +
        "server restarts 1, resumed at end 52, 612 s)",
    );
  });

  it("passes only with nothing duplicated, lost or broken, and every run made", () => {
    expect(passed(report)).toBe(true);
    expect(passed({ ...report, duplicateEffects: 1 })).toBe(false);
    expect(passed({ ...report, lostIntents: 1 })).toBe(false);
    expect(passed({ ...report, otherViolations: 1 })).toBe(false);
    expect(passed({ ...report, runs: 9_999 })).toBe(false);
    const durable = {
      intents: 24,
      kills: 9,
      signalsSent: 76,
      duplicateSignals: 48,
      wokeByDelivery: 11,
      conflictsRefused: 4,
      unusableRefused: 8,
      acknowledgedUnusable: 0,
      clientAnswers: { accepted: 3, inProgress: 8, completed: 1 },
      takeovers: 1,
      retriedFrom: { plain: 2, resend: 2 },
      outbox: { messages: 28, deliveries: 36, redeliveries: 6, intendedResends: 2 },
      retention: { intents: 4, replays: 9, keyExpired: 8, signals: 13, expiredSignals: 5, reExecutions: 0 },
      duplicateEffects: 0,
      lostIntents: 0,
      signalsNotOnce: 0,
      otherViolations: 0,
      problems: [],
      seconds: 15,
    };
    expect(passed({ ...report, durable })).toBe(true);
    expect(passed({ ...report, durable: { ...durable, signalsNotOnce: 1 } })).toBe(false);
    expect(passed({ ...report, durable: { ...durable, duplicateEffects: 1 } })).toBe(false);
    expect(passed({ ...report, durable: { ...durable, acknowledgedUnusable: 1 } })).toBe(false);
  });

  it("fails a run whose fan-out scenario exceeded a limit or the rate, and prints its line", () => {
    const fanout = {
      mode: "map" as const,
      parents: 12,
      children: 240,
      kills: { fanOut: 2, fanIn: 2 },
      takeovers: 9,
      samples: 1_200,
      peaks: [{ limitKey: "fanout_transfer_1\u001fs1", max: 1, slots: 1, executing: 1 }],
      limitsExceeded: 0,
      rateLimitedCalls: 260,
      rateExcess: -30,
      providerCalls: 300,
      providerOperations: 288,
      duplicateEffects: 0,
      lostIntents: 0,
      otherViolations: 0,
      problems: [],
      seconds: 12,
    };
    expect(passed({ ...report, fanout })).toBe(true);
    expect(passed({ ...report, fanout: { ...fanout, limitsExceeded: 1 } })).toBe(false);
    expect(passed({ ...report, fanout: { ...fanout, rateExcess: 0.5 } })).toBe(false);
    expect(passed({ ...report, fanout: { ...fanout, lostIntents: 1 } })).toBe(false);
    expect(details({ ...report, fanout }).some((l) => l.includes("fanout_transfer_1:s1 1/1 of 1"))).toBe(true);
  });

  it("prints the operator scenario's figures when it ran", () => {
    const operators = {
      intents: 34,
      released: 20,
      canceled: 2,
      retriedFrom: 5,
      refusedDeletes: 6,
      forgotten: 1,
      parked: 4,
      duplicateEffects: 0,
      lostIntents: 0,
      otherViolations: 0,
      problems: [],
    };
    expect(details(report).some((l) => l.startsWith("operators:"))).toBe(false);
    expect(details({ ...report, operators })).toContain(
      "operators: 34 intents, released 20, canceled 2, retried from 5, unforced deletes refused 6, forgotten 1, " +
        "poison runs parked 4; duplicate effects 0, lost intents 0, other violations 0",
    );
  });
});
