/**
 * Suspended runs through the real `idempo` binary: runs sleeping, waiting
 * for a signal (with and without a timeout, delivered, timed out) and
 * enqueued, seeded by real workflow runs. The CLI says what each waits for,
 * when it wakes, and what a retry would do now; then the retries are made
 * and must do what was said.
 */
import type { Engine } from "@idempo/core";
import { createEngine, IdempotencyKeyInProgressError } from "@idempo/core";
import { beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { approval, hurried, payment, trial } from "./fixtures/durable-workflows.ts";
import type { CliResult } from "./support/cli.ts";
import { idempo, jsonLines } from "./support/cli.ts";

const HOUR = 3_600_000;
const WEEK = 7 * 24 * HOUR;
/** Rounding to whole ms and the distance between the database's clock and this process's on one machine. */
const SLACK_MS = 1_000;

/** When something ran, by this process's clock: what a time the database computed meanwhile is checked against. */
interface Window {
  started: number;
  ended: number;
}
/** When each run's sleep or wait was recorded (its wake-up time is that plus its length). */
const seededAt: Record<string, Window> = {};

async function timed<T>(into: Record<string, Window>, name: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const result = await work();
  into[name] = { started, ended: Date.now() };
  return result;
}

/**
 * The ms to a wake-up time `wakeAt` as something that ran during `window`
 * would have computed it: between its value at the window's end and at its
 * start. Bounded by when the work ran, never by how long it took.
 */
function expectMsUntil(ms: unknown, wakeAt: unknown, window: Window): void {
  const at = new Date((wakeAt as Date | string | null | undefined) ?? Number.NaN).getTime();
  expect(ms).toBeGreaterThanOrEqual(at - window.ended - SLACK_MS);
  expect(ms).toBeLessThanOrEqual(at - window.started + SLACK_MS);
}

/** The wake-up time of a run seeded during `window` that suspends for `lengthMs`. */
function expectWakeAt(wakeAt: unknown, lengthMs: number, window: Window): void {
  const at = new Date((wakeAt as Date | string | null | undefined) ?? Number.NaN).getTime();
  expect(at).toBeGreaterThanOrEqual(window.started + lengthMs - SLACK_MS);
  expect(at).toBeLessThanOrEqual(window.ended + lengthMs + SLACK_MS);
}

let engine: Engine;
const seeded = useClonedDatabase("idempo_cli_suspended", {
  pool: 4,
  prepare: async (db) => {
    const e = createEngine({ db });
    // Oldest first, so "newest first" has a known order.
    await timed(seededAt, "trial-1", () =>
      e.runOnce(trial, { tenantId: "acme", key: "trial-1", input: { sleepMs: HOUR } }),
    );
    await e.runOnce(trial, { tenantId: "acme", key: "trial-due", input: { sleepMs: 0 } });
    await timed(seededAt, "pay-1", () => e.runOnce(payment, { tenantId: "acme", key: "pay-1", input: {} }));
    await e.runOnce(payment, { tenantId: "globex", key: "pay-2", input: {} });
    await e.signal("globex", "pay-2", "confirmed", { by: "provider" });
    await e.runOnce(approval, { tenantId: "acme", key: "approve-1", input: {} });
    await e.runOnce(hurried, { tenantId: "acme", key: "hurry-1", input: {} });
    await e.enqueue(db, trial, { tenantId: "acme", key: "enq-1", input: { sleepMs: 0 } });
    // hurry-1's 1 ms timeout has passed by the database clock once its wake-up time is in the past.
    for (let i = 0; i < 200; i++) {
      const r = await e.inspect("acme", "hurry-1");
      if (r?.wakeAt && r.wakeAt.getTime() < Date.now() - 5) break;
      await new Promise((res) => setTimeout(res, 10));
    }
  },
});

const run = (args: string[]) => idempo(args, { DATABASE_URL: seeded.url });
let r: Record<string, CliResult>;
/** When each command ran. */
const ranAt: Record<string, Window> = {};

beforeAll(async () => {
  engine = createEngine({ db: seeded.db });
  const commands: Record<string, string[]> = {
    table: ["keys", "list", "--status", "suspended"],
    json: ["keys", "list", "--status", "suspended", "--json"],
    mixed: ["keys", "list", "--tenant", "globex"],
    stuck: ["keys", "stuck"],
    showSleep: ["keys", "show", "acme", "trial-1"],
    showSleepJson: ["keys", "show", "acme", "trial-1", "--json"],
    showDueSleep: ["keys", "show", "acme", "trial-due", "--json"],
    showWait: ["keys", "show", "acme", "pay-1"],
    showSignalled: ["keys", "show", "globex", "pay-2", "--json"],
    showSignalledText: ["keys", "show", "globex", "pay-2"],
    showApproval: ["keys", "show", "acme", "approve-1"],
    showTimedOut: ["keys", "show", "acme", "hurry-1", "--json"],
    showEnqueued: ["keys", "show", "acme", "enq-1", "--json"],
  };
  r = {};
  const names = Object.keys(commands);
  let next = 0;
  await Promise.all(
    Array.from({ length: 3 }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        r[name] = await timed(ranAt, name, () => run(commands[name] as string[]));
      }
    }),
  );
}, 600_000); // bounded work (13 commands, 3 at a time)

describe("keys list --status suspended", () => {
  it("shows what each run waits for and when it wakes, relative and absolute, within 100 columns", () => {
    expect(r.table?.code).toBe(0);
    const lines = r.table?.stdout.trimEnd().split("\n") ?? [];
    expect(lines[0]).toMatch(/^TENANT\s+KEY\s+WORKFLOW\s+WAITS FOR\s+WAKES\s+WAKE-UP \(UTC\)\s+AGE$/);
    const row = (key: string) => lines.find((l) => l.includes(` ${key} `)) ?? "";
    const Z = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ";
    expect(row("enq-1")).toMatch(
      new RegExp(`acme\\s+enq-1\\s+trial\\s+a worker \\(enqueued\\)\\s+due for [\\dms ]+?\\s+${Z}\\s`),
    );
    expect(row("hurry-1")).toMatch(new RegExp(`hurried\\s+signal answer\\s+due for [\\dms ]+?\\s+${Z}\\s`));
    expect(row("approve-1")).toMatch(/approval\s+signal approved\s+on signal\s+-\s/);
    expect(row("pay-2")).toMatch(
      new RegExp(`globex\\s+pay-2\\s+payment\\s+signal confirmed \\(arr\\S*\\s+due for [\\dms ]+?\\s+${Z}`),
    );
    expect(row("pay-1")).toMatch(new RegExp(`pay-1\\s+payment\\s+signal confirmed\\s+in 6d \\d+h\\s+${Z}`));
    expect(row("trial-due")).toMatch(/trial\s+sleep cool_off\s+due for [\dms ]+?/);
    expect(row("trial-1")).toMatch(new RegExp(`trial-1\\s+trial\\s+sleep cool_off\\s+in (\\d+m|1h)\\s+${Z}`));
    expect(lines.at(-1)).toBe("7 keys");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
  });

  it("--json carries waitingFor, wakeAt, wakesInMs and whether the signal arrived", () => {
    const rows = jsonLines(r.json?.stdout ?? "");
    const by = (key: string) => rows.find((x) => x.key === key);
    expect(rows).toHaveLength(7);
    expect(by("trial-1")).toMatchObject({
      status: "suspended",
      recoveryPoint: "cool_off",
      waitingFor: { kind: "sleep", name: "cool_off", until: expect.stringMatching(/^\d{4}-/) },
      wakeAt: expect.stringMatching(/^\d{4}-/),
      signalDelivered: null,
      leaseRemainingMs: null,
      stuck: false,
    });
    // The wake-up is the sleep's (the wait's timeout's) length after the run suspended, and wakesInMs the time
    // to it from when the command ran: bounded by when things ran, however long they took.
    const json = ranAt.json as Window;
    expectWakeAt(by("trial-1")?.wakeAt, HOUR, seededAt["trial-1"] as Window);
    expectMsUntil(by("trial-1")?.wakesInMs, by("trial-1")?.wakeAt, json);
    expect(by("pay-1")).toMatchObject({ waitingFor: { kind: "signal", name: "confirmed" }, signalDelivered: false });
    expectWakeAt(by("pay-1")?.wakeAt, WEEK, seededAt["pay-1"] as Window);
    expectMsUntil(by("pay-1")?.wakesInMs, by("pay-1")?.wakeAt, json);
    expect(by("pay-2")).toMatchObject({ signalDelivered: true });
    expect(by("pay-2")?.wakesInMs).toBeLessThanOrEqual(0);
    expect(by("approve-1")).toMatchObject({
      waitingFor: { kind: "signal", name: "approved", until: null },
      wakeAt: null,
      wakesInMs: null,
      signalDelivered: false,
    });
    expect(by("enq-1")).toMatchObject({ waitingFor: null, attempts: 0, signalDelivered: null });
    expect(by("enq-1")?.wakesInMs).toBeLessThanOrEqual(0);
  });

  it("a mixed listing notes what a suspended row waits for", () => {
    const out = r.mixed?.stdout ?? "";
    expect(out).toMatch(/globex\s+pay-2\s+payment\s+suspended\s+authorise\s+1\s+-/);
    expect(out).toMatch(
      /\n {2}↳ waits for signal confirmed \(arrived\); due for [\dms ]+, since \d{4}-[\d-]+T[\d:]+Z\n/,
    );
  });

  it("keys stuck never lists suspended runs", () => {
    expect(r.stuck).toMatchObject({ code: 0, stdout: "no stuck keys: every in-flight key has a live lease\n" });
  });
});

describe("keys show of a suspended run", () => {
  const flat = (name: string) => (r[name]?.stdout ?? "").replace(/\n {17}/g, " ");

  it("a sleep: where it sleeps, when it wakes, and a 409 with retry-after until then", () => {
    const out = flat("showSleep");
    expect(out).toMatch(/^acme \/ trial-1 {2}trial {2}suspended\n/);
    expect(out).toMatch(/stopped +sleeping in sleep cool_off, wakes in (\d+m|1h) at \d{4}-[\d-]+T[\d:]+Z/);
    expect(out).toMatch(
      /retry now +409 key_in_progress with retryAfterMs \d+ \((\d+m|1h)\): the sleep cool_off wakes at \S+Z; then a worker or the next retry resumes it after cool_off: next phase finish/,
    );
    expect(out).toMatch(/workflow +trial: ✓ phase start {2}… sleep cool_off {2}› phase finish/);
    expect(out).toMatch(/waits for +sleep cool_off\n/);
    expect(out).toMatch(/wakes +in (\d+m|1h) at \S+Z: end of the sleep\n/);
    expect(out).toMatch(/2 +\d{4}-\d\d-\d\d [\d:.]+ +sleep +cool_off +1 +\d+m?s so far +sleeping/);
    for (const line of (r.showSleep?.stdout ?? "").split("\n")) expect(line.length).toBeLessThanOrEqual(100);
    const json = JSON.parse(r.showSleepJson?.stdout ?? "null");
    expect(json.retry).toMatchObject({
      action: "suspended",
      kind: "sleep",
      name: "cool_off",
      until: json.wakeAt,
      resumeAfter: "cool_off",
    });
    expect(json.retry.retryAfterMs).toBe(json.wakesInMs);
    expect(json.history.map((h: { kind: string; outcome: string }) => `${h.kind}:${h.outcome}`)).toEqual([
      "phase:succeeded",
      "sleep:started",
    ]);
  });

  it("a wait with a timeout: the signal to send, its timeout, and a 409 until then", () => {
    const out = flat("showWait");
    expect(out).toMatch(/stopped +at recovery point authorise, waiting for signal confirmed \(times out in 6d \d+h/);
    expect(out).toMatch(/✓ phase authorise {2}… wait confirmed {4}phase capture/);
    expect(out).toMatch(
      /waits for +signal confirmed: send it with engine.signal\("acme", "pay-1", "confirmed", payload\)/,
    );
    expect(out).toMatch(/wakes +in 6d \d+h at \S+Z: the wait's timeout/);
    expect(out).toMatch(
      /retry now +409 key_in_progress with retryAfterMs \d+ \(6d \d+h\) until the signal confirmed arrives, or the wait times out at \S+Z; send it with engine.signal\("acme", "pay-1", "confirmed", payload\); then a worker or the next retry merges it into state: next phase capture/,
    );
    expect(out).toMatch(/wait +confirmed +1 +\d+m?s so far +waiting for the signal/);
  });

  it("a wait without timeout: no wake-up time, the lease length as retry-after", () => {
    const out = flat("showApproval");
    expect(out).toMatch(/waiting for signal approved \(no timeout\)/);
    expect(out).toMatch(/wakes +when the signal arrives \(no timeout\)/);
    expect(out).toMatch(
      /retry now +409 key_in_progress with retryAfterMs the workflow's lease length \(no wake-up time is known\) until the signal approved arrives; send it with engine.signal\("acme", "approve-1", "approved", payload\)/,
    );
  });

  it("due runs: a retry resumes them here, and says why they are due", () => {
    const signalled = JSON.parse(r.showSignalled?.stdout ?? "null");
    expect(signalled).toMatchObject({
      status: "suspended",
      signalDelivered: true,
      retry: {
        action: "resume",
        attempt: 1,
        resumeAfter: "authorise",
        next: "wait:confirmed",
        because: "signal_delivered",
      },
    });
    expect(flat("showSignalledText")).toMatch(
      /retry now +take the run and resume it here as attempt 1 \(not a new attempt; a worker may get there first\): the signal confirmed has arrived; merge its payload into state as confirmed, next phase capture/,
    );
    expect(flat("showSignalledText")).toMatch(
      /waits for +signal confirmed \(arrived\): a worker or a retry merges it now/,
    );
    expect(JSON.parse(r.showTimedOut?.stdout ?? "null")).toMatchObject({
      signalDelivered: false,
      stoppedAt: expect.stringMatching(/waiting for signal answer \(timed out \S+ ago/),
      retry: { action: "resume", next: "wait:answer", because: "timed_out" },
    });
    expect(JSON.parse(r.showDueSleep?.stdout ?? "null")).toMatchObject({
      retry: { action: "resume", attempt: 1, resumeAfter: "cool_off", next: "phase:finish", because: "slept" },
    });
    expect(JSON.parse(r.showEnqueued?.stdout ?? "null")).toMatchObject({
      attempts: 0,
      waitingFor: null,
      stoppedAt: expect.stringMatching(/^enqueued, not started by a worker yet, due since \S+Z$/),
      retry: { action: "resume", attempt: 1, resumeAfter: null, next: "phase:start", because: "enqueued" },
      history: [],
    });
  });

  it("the retries then do what was said", async () => {
    const inProgress = async (p: Promise<unknown>) => {
      const error = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(IdempotencyKeyInProgressError);
      return (error as IdempotencyKeyInProgressError).retryAfterMs;
    };
    // retryAfterMs points at the wake-up: the time to it from when the retry ran.
    const retriedAt: Record<string, Window> = {};
    const trialRetry = await timed(retriedAt, "trial-1", () =>
      inProgress(engine.runOnce(trial, { tenantId: "acme", key: "trial-1", input: { sleepMs: HOUR } })),
    );
    expectMsUntil(trialRetry, (await engine.inspect("acme", "trial-1"))?.wakeAt, retriedAt["trial-1"] as Window);
    const payRetry = await timed(retriedAt, "pay-1", () =>
      inProgress(engine.runOnce(payment, { tenantId: "acme", key: "pay-1", input: {} })),
    );
    expectMsUntil(payRetry, (await engine.inspect("acme", "pay-1"))?.wakeAt, retriedAt["pay-1"] as Window);
    await inProgress(engine.runOnce(approval, { tenantId: "acme", key: "approve-1", input: {} }));
    await expect(engine.runOnce(payment, { tenantId: "globex", key: "pay-2", input: {} })).resolves.toMatchObject({
      status: 201,
      body: { captured: "auth_pay-2" },
    });
    await expect(engine.runOnce(hurried, { tenantId: "acme", key: "hurry-1", input: {} })).resolves.toMatchObject({
      status: 408,
    });
    await expect(
      engine.runOnce(trial, { tenantId: "acme", key: "trial-due", input: { sleepMs: 0 } }),
    ).resolves.toMatchObject({
      status: 200,
    });
    // The enqueued trial starts here and reaches its (zero-length) sleep: 202 again, then due.
    const enqueued = { tenantId: "acme", key: "enq-1", input: { sleepMs: 0 } };
    await expect(engine.runOnce(trial, enqueued)).resolves.toMatchObject({ status: 202, outcome: "suspended" });
    await expect(engine.runOnce(trial, enqueued)).resolves.toMatchObject({ status: 200 });
    expect((await engine.inspect("acme", "enq-1"))?.attempt).toBe(1);
    expect((await engine.inspect("globex", "pay-2"))?.state).toMatchObject({ confirmed: { by: "provider" } });
  });
});
