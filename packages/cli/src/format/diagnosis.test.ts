import type { HistoryEntry, RunRecord } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { describeRetry, diagnose } from "./diagnosis.js";

const now = new Date("2026-12-01T10:00:00Z");
const at = (s: number) => new Date(now.getTime() + s * 1000);

function entry(over: Partial<HistoryEntry>): HistoryEntry {
  return {
    kind: "phase",
    name: "create_order",
    branch: null,
    attempt: 1,
    derivedKey: null,
    outcome: "succeeded",
    error: null,
    startedAt: at(-600),
    finishedAt: at(-599),
    tries: null,
    ...over,
  };
}

function record(over: Partial<RunRecord>): RunRecord {
  return {
    tenantId: "acme",
    key: "order-1",
    runId: "run-1",
    workflow: "checkout",
    workflowVersion: 1,
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
    tombstoneUntil: null,
    history: [entry({})],
    parent: null,
    children: [],
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
    expect(d.stoppedAt).toBe("sleeping in sleep grace, wakes in 1h at 2026-12-01T11:00:00Z");
    expect(d.retry).toEqual({
      action: "suspended",
      kind: "sleep",
      name: "grace",
      until: at(3600),
      retryAfterMs: 3_600_000,
      resumeAfter: "create_order",
    });
    expect(describeRetry(sleeping, d)).toMatch(
      /^409 key_in_progress with retryAfterMs 3600000 \(1h\): the sleep grace wakes at 2026-12-01T11:00:00Z/,
    );

    const waiting = record({
      status: "suspended",
      ownerToken: null,
      leaseRemainingMs: null,
      waitingFor: { kind: "signal", name: "confirmed" },
      wakeAt: null,
    });
    expect(diagnose(waiting, now).stoppedAt).toMatch(/signal confirmed \(no timeout\)$/);
    expect(describeRetry(waiting, diagnose(waiting, now))).toMatch(/until the signal confirmed arrives/);

    const enqueued = record({ status: "suspended", recoveryPoint: null, attempt: 0, wakeAt: at(-5) });
    const e = diagnose(enqueued, now);
    expect(e.stoppedAt).toMatch(/^enqueued, not started by a worker yet, due since/);
    expect(describeRetry(enqueued, e)).toMatch(
      /^take the run and resume it here as attempt 1 .*: next phase create_order$/,
    );
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

describe("diagnosis: suspended runs", () => {
  const suspended = (over: Partial<RunRecord>) =>
    record({
      status: "suspended",
      ownerToken: null,
      leaseRemainingMs: null,
      definition: ["phase:authorise", "wait:confirmed", "phase:capture"],
      recoveryPoint: "authorise",
      history: [
        entry({ name: "authorise" }),
        entry({ kind: "wait", name: "confirmed", outcome: "started", finishedAt: null }),
      ],
      ...over,
    });

  it("a wait not due is a 409 until its timeout, naming the signal to send", () => {
    const r = suspended({ waitingFor: { kind: "signal", name: "confirmed", until: at(60) }, wakeAt: at(60) });
    const d = diagnose(r, now, { signalDelivered: false });
    expect(d.condition).toBe("suspended");
    expect(d.retry).toEqual({
      action: "suspended",
      kind: "signal",
      name: "confirmed",
      until: at(60),
      retryAfterMs: 60_000,
      resumeAfter: "authorise",
    });
    expect(describeRetry(r, d)).toContain('engine.signal("acme", "order-1", "confirmed", payload)');
  });

  it("a due wait resumes, and says whether the signal came or the timeout passed", () => {
    const r = suspended({ waitingFor: { kind: "signal", name: "confirmed", until: at(-1) }, wakeAt: at(-1) });
    expect(diagnose(r, now, { signalDelivered: true }).retry).toMatchObject({
      action: "resume",
      because: "signal_delivered",
      next: { kind: "wait", name: "confirmed" },
    });
    expect(diagnose(r, now, { signalDelivered: false }).retry).toMatchObject({ because: "timed_out" });
    expect(diagnose(r, now).retry).toMatchObject({ because: "signal_or_timeout" });
  });

  it("a suspended run is never read as stuck, whatever its (absent) lease says", () => {
    const r = suspended({ waitingFor: { kind: "sleep", name: "confirmed", until: at(5) }, wakeAt: at(5) });
    expect(diagnose(r, now).condition).toBe("suspended");
    expect(diagnose(r, now).retry.action).not.toBe("take_over");
  });
});

describe("diagnosis: parallel items", () => {
  const branch = (name: string, outcome: HistoryEntry["outcome"]) =>
    entry({ kind: "branch", name: "notify", branch: name, outcome, derivedKey: `idem_${name}`, finishedAt: null });

  it("names the branch in doubt of a crashed parallel item and what the takeover calls again", () => {
    const crashed = record({
      definition: ["phase:create_order", 'parallel["email","sms"]:notify', "phase:record"],
      history: [entry({}), branch("email", "succeeded"), branch("sms", "started")],
    });
    const d = diagnose(crashed, now);
    expect(d.next).toEqual({ kind: "parallel", name: "notify", branches: ["email", "sms"] });
    expect(d.inDoubt?.branch).toBe("sms");
    expect(d.stoppedAt).toBe(
      "at recovery point create_order, in branch sms of parallel notify (started, result unknown)",
    );
    expect(describeRetry(crashed, d)).toBe(
      "take over as attempt 2 and resume after create_order: call branch sms of parallel notify again with the same " +
        "derived key idem_sms (its first call may have gone through; the provider deduplicates on that key)",
    );
  });

  it("has nothing in doubt once every branch recorded", () => {
    const recorded = record({
      definition: ["phase:create_order", 'parallel["email","sms"]:notify'],
      history: [entry({}), branch("email", "succeeded"), branch("sms", "succeeded")],
    });
    expect(diagnose(recorded, now).inDoubt).toBeNull();
  });
});
