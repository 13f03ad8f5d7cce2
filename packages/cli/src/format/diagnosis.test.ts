import type { HistoryEntry, RunRecord } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { describeRetry, diagnose } from "./diagnosis.js";

const now = new Date("2026-12-01T10:00:00Z");
const at = (s: number) => new Date(now.getTime() + s * 1000);

function entry(over: Partial<HistoryEntry>): HistoryEntry {
  return {
    kind: "phase",
    name: "create_order",
    attempt: 1,
    derivedKey: null,
    outcome: "succeeded",
    error: null,
    startedAt: at(-600),
    finishedAt: at(-599),
    ...over,
  };
}

function record(over: Partial<RunRecord>): RunRecord {
  return {
    tenantId: "acme",
    key: "order-1",
    runId: "run-1",
    workflow: "checkout",
    definition: ["phase:create_order", "step:charge", "phase:record_charge"],
    status: "in_flight",
    parkedReason: null,
    parkedAt: null,
    attemptsSinceUnpark: 1,
    waitingFor: null,
    wakeAt: null,
    recoveryPoint: "create_order",
    state: {},
    input: {},
    attempt: 1,
    ownerToken: "owner-1",
    leaseRemainingMs: -60_000,
    response: null,
    createdAt: at(-600),
    updatedAt: at(-599),
    expiresAt: null,
    expired: false,
    history: [entry({})],
    ...over,
  };
}

describe("diagnosis: what a retry will really do", () => {
  it("a suspended run: what it waits for, when it wakes, and that a retry resumes it then", () => {
    const sleeping = record({
      status: "suspended",
      ownerToken: null,
      leaseRemainingMs: null,
      waitingFor: { kind: "sleep", name: "grace", until: at(3600) },
      wakeAt: at(3600),
    });
    const d = diagnose(sleeping, now);
    expect(d.condition).toBe("suspended");
    expect(d.stoppedAt).toBe(
      "suspended at recovery point create_order: sleep grace (wakes at 2026-12-01T11:00:00Z (in 1h))",
    );
    expect(d.retry).toEqual({ action: "resume", due: false, wakeAt: at(3600), resumeAfter: "create_order" });
    expect(describeRetry(sleeping, d)).toMatch(/^409 key_in_progress until 2026-12-01T11:00:00Z/);

    const waiting = record({
      status: "suspended",
      ownerToken: null,
      leaseRemainingMs: null,
      waitingFor: { kind: "signal", name: "confirmed" },
      wakeAt: null,
    });
    expect(diagnose(waiting, now).stoppedAt).toMatch(/signal confirmed \(no timeout\)$/);
    expect(describeRetry(waiting, diagnose(waiting, now))).toMatch(/until its signal arrives/);

    const enqueued = record({ status: "suspended", recoveryPoint: null, attempt: 0, wakeAt: at(-5) });
    const e = diagnose(enqueued, now);
    expect(e.stoppedAt).toMatch(/enqueued, not started yet \(due since/);
    expect(describeRetry(enqueued, e)).toMatch(/^resume it after the start/);
  });

  it("a stuck run whose last crash left work: take over and resume", () => {
    const r = record({});
    const d = diagnose(r, now);
    expect(d.retry).toMatchObject({ action: "take_over", attempt: 2, refusedBefore: 0 });
    expect(describeRetry(r, d)).toMatch(/^take over as attempt 2 and resume after create_order/);
  });

  it("takeovers that started nothing: says a takeover is refused before it runs, and why it can be", () => {
    // Attempts 2 and 3 took the run over and never started a phase or step: the takeover was refused
    // (a random zod default parses the stored input differently than at the claim).
    const r = record({ attempt: 3 });
    const d = diagnose(r, now);
    expect(d.retry).toMatchObject({ action: "take_over", attempt: 4, refusedBefore: 2 });
    const text = describeRetry(r, d);
    expect(text).not.toMatch(/^take over as attempt 4 and resume/);
    expect(text).toMatch(/attempts 2-3 took the run over and started nothing/);
    expect(text).toMatch(/input schema/);
    expect(text).toMatch(/not deterministic/);
  });

  it("a first attempt that started nothing is no refused takeover", () => {
    const r = record({ attempt: 1, recoveryPoint: null, history: [] });
    expect(diagnose(r, now).retry).toMatchObject({ action: "take_over", attempt: 2, refusedBefore: 0 });
  });

  it("a live lease: 409 while the owner's heartbeat renews it, a takeover only once it stops", () => {
    const r = record({ leaseRemainingMs: 20_000 });
    const d = diagnose(r, now);
    expect(d.retry).toMatchObject({ action: "wait", retryAfterMs: 20_000 });
    const text = describeRetry(r, d);
    expect(text).toMatch(/^409 key_in_progress/);
    expect(text).toMatch(/heartbeat/);
    expect(text).not.toMatch(/; then take over/);
    expect(text).toMatch(/only once .*stops/);
  });
});
