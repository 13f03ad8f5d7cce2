/**
 * Races around waits, on real parallel connections: a signal committed
 * while the run is between "checked for the signal" and "committed
 * suspended" still wakes it (the lost wake-up); duplicate signals racing the
 * wait are merged once; waiters (engine.wait, runOnce's waitInFlightMs)
 * answer from the stored result and hold no pooled connection while waiting.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import {
  createEngine,
  IdempotencyKeyInProgressError,
  RunNotFoundError,
  RunParkedError,
  workflow,
} from "../src/index.ts";
import { setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { barrier, pauseAt } from "./support/faults.ts";

const t = useTestDatabase({ pool: 10 });
const T = "acme";

function confirmed(name: string, counter = { after: 0 }) {
  const wf = workflow(name)
    .step("charge", () => ({ chargeId: "ch" }))
    .waitFor("confirmed")
    .phase("capture", ({ state }) => {
      counter.after++;
      return { captured: state.chargeId };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, counter };
}

async function runRow(key: string) {
  const { rows } = await sql<{ status: string; due: boolean | null }>`
    SELECT status, wake_at <= clock_timestamp() AS due FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}`.execute(
    t.db,
  );
  return rows[0];
}

/** Sessions of this database waiting for a row lock right now. */
async function lockWaiters(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(t.db);
  return rows[0]?.n ?? 0;
}

describe("the lost wake-up", () => {
  it("a signal sent while the wait holds the run's row waits for the suspension, then wakes the run", async () => {
    const { wf } = confirmed("race_hook");
    const runner = createEngine({ db: t.connect(3) });
    // The signalling process has the workflow: it checks payloads against the run's version.
    const sender = createEngine({ db: t.connect(3), workflows: [wf] });
    const pause = pauseAt(runner, "locked:wait:confirmed");
    const running = runner.runOnce(wf, { tenantId: T, key: "h1", input: {} });
    await pause.reached;
    // The run has checked nothing yet but holds its row; the signal must queue behind it.
    const signalled = sender.signal(T, "h1", "confirmed", { ok: true });
    await expect.poll(lockWaiters, { timeout: 60_000 }).toBe(1);
    pause.resume();
    expect(await running).toMatchObject({ status: 202, outcome: "suspended" });
    expect(await signalled).toEqual({ duplicate: false, woke: true });
    pause.clear();
    expect(await runRow("h1")).toEqual({ status: "suspended", due: true });
    expect(await runner.runOnce(wf, { tenantId: T, key: "h1", input: {} })).toMatchObject({
      status: 201,
      body: { confirmed: { ok: true }, captured: "ch" },
    });
  });

  it("run and signal started together, many times: every run ends completed or due, never asleep on a signal that came", async () => {
    const { wf, counter } = confirmed("race_parallel");
    const runner = createEngine({ db: t.connect(4) });
    const sender = createEngine({ db: t.connect(4), workflows: [wf] });
    const n = 60;
    for (let i = 0; i < n; i++) {
      const key = `p${i}`;
      let charged!: () => void;
      const afterCharge = new Promise<void>((r) => {
        charged = r;
      });
      setFaultHook(runner, (point, run) => {
        if (point === "after:step:charge" && run.key === key) charged();
      });
      const running = runner.runOnce(wf, { tenantId: T, key, input: {} });
      await afterCharge;
      // Vary the interleaving a little: 0 to 3 turns of the event loop.
      for (let k = 0; k < i % 4; k++) await new Promise((r) => setImmediate(r));
      const [first, sent] = await Promise.all([running, sender.signal(T, key, "confirmed", { i })]);
      expect(sent.duplicate).toBe(false);
      const row = await runRow(key);
      if (first.outcome === "suspended") {
        // The signal came after the suspension committed: it must have made the run due.
        expect(sent.woke, key).toBe(true);
        expect(row, key).toEqual({ status: "suspended", due: true });
      } else {
        expect(first, key).toMatchObject({ status: 201, body: { confirmed: { i } } });
      }
    }
    setFaultHook(runner, undefined);
    for (let i = 0; i < n; i++) {
      const res = await runner.runOnce(wf, { tenantId: T, key: `p${i}`, input: {} });
      expect(res).toMatchObject({ status: 201, body: { confirmed: { i } } });
    }
    expect(counter.after).toBe(n);
  });
});

describe("duplicate signals racing the wait", () => {
  it("three identical deliveries at once, while the run reaches its wait: one counts, the payload is merged once", async () => {
    const { wf, counter } = confirmed("race_dupes");
    const runner = createEngine({ db: t.connect(3) });
    const senders = [
      createEngine({ db: t.connect(2), workflows: [wf] }),
      createEngine({ db: t.connect(2), workflows: [wf] }),
      createEngine({ db: t.connect(2), workflows: [wf] }),
    ];
    const n = 30;
    for (let i = 0; i < n; i++) {
      const key = `d${i}`;
      let charged!: () => void;
      const afterCharge = new Promise<void>((r) => {
        charged = r;
      });
      setFaultHook(runner, (point, run) => {
        if (point === "after:step:charge" && run.key === key) charged();
      });
      const running = runner.runOnce(wf, { tenantId: T, key, input: {} });
      await afterCharge;
      const start = barrier(senders.length);
      const sends = senders.map(async (s) => {
        await start.wait();
        return s.signal(T, key, "confirmed", { webhook: "evt_1", i });
      });
      const [, ...results] = await Promise.all([running, ...sends]);
      expect(
        results.filter((r) => !r.duplicate),
        key,
      ).toHaveLength(1);
    }
    setFaultHook(runner, undefined);
    for (let i = 0; i < n; i++) {
      const key = `d${i}`;
      expect(await runner.runOnce(wf, { tenantId: T, key, input: {} })).toMatchObject({
        status: 201,
        body: { confirmed: { webhook: "evt_1", i } },
      });
      const rec = await runner.inspect(T, key);
      expect(
        rec?.history?.filter((h) => h.kind === "wait").map((h) => h.outcome),
        key,
      ).toEqual(["succeeded"]);
    }
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = ${T} AND key LIKE 'd%'`.execute(t.db);
    expect(rows[0]?.n).toBe(n);
    expect(counter.after).toBe(n);
  });
});

describe("waiting for a result", () => {
  const slow = () =>
    workflow("wait_slow")
      .phase("a", () => ({ a: 1 }))
      .phase("b", () => ({ b: 2 }))
      .respond(({ state }) => ({ status: 201, body: state }));

  it("engine.wait resolves with the stored result of a run in flight elsewhere; 409 at the timeout; typed errors", async () => {
    // A ten-minute lease: the owner's lease is still running when the waiter looks, however slow the machine.
    const leaseMs = 600_000;
    const owner = createEngine({ db: t.connect(3), leaseMs });
    const waiter = createEngine({ db: t.connect(2) });
    const wf = slow();
    const pause = pauseAt(owner, "before:phase:b");
    const started = Date.now();
    const running = owner.runOnce(wf, { tenantId: T, key: "w1", input: {} });
    await pause.reached;
    const timedOut = await waiter.wait(T, "w1", { timeoutMs: 0 }).catch((e) => e);
    const answered = Date.now();
    expect(timedOut).toBeInstanceOf(IdempotencyKeyInProgressError);
    // The owner's lease left when the waiter asked: bounded by when things ran (1 s for rounding and clocks).
    expect(timedOut.retryAfterMs).toBeGreaterThanOrEqual(leaseMs - (answered - started) - 1_000);
    expect(timedOut.retryAfterMs).toBeLessThanOrEqual(leaseMs + 1_000);
    const waiting = waiter.wait(T, "w1", { timeoutMs: 120_000 });
    pause.resume();
    const first = await running;
    expect(await waiting).toEqual({ ...first, replayed: true });
    pause.clear();
    await expect(waiter.wait(T, "absent", { timeoutMs: 10 })).rejects.toBeInstanceOf(RunNotFoundError);
    await expect(waiter.wait(T, "w1", { timeoutMs: -1 })).rejects.toMatchObject({ code: "invalid_option" });

    const poison = workflow("wait_poison")
      .phase("a", () => ({ bad: 10n }))
      .respond(() => ({ status: 200, body: null }));
    await owner.runOnce(poison, { tenantId: T, key: "w2", input: {} }).catch(() => undefined);
    await expect(waiter.wait(T, "w2", { timeoutMs: 10 })).rejects.toBeInstanceOf(RunParkedError);
  });

  it("engine.wait on a suspended run wakes when a worker completes it", async () => {
    const engine = createEngine({ db: t.db });
    const { wf } = confirmed("wait_suspended");
    await engine.runOnce(wf, { tenantId: T, key: "ws", input: {} });
    const waiting = engine.wait(T, "ws", { timeoutMs: 120_000 });
    await engine.signal(T, "ws", "confirmed", "yes");
    const worker = engine.startWorker({ workflows: [wf], intervalMs: 20, sweep: false });
    try {
      expect(await waiting).toMatchObject({ status: 201, replayed: true, body: { confirmed: "yes" } });
    } finally {
      await worker.stop();
    }
  });

  it("engine.wait on a suspended run answers with the operator's cancel", async () => {
    const engine = createEngine({ db: t.db });
    const { wf } = confirmed("wait_canceled");
    await engine.runOnce(wf, { tenantId: T, key: "wc", input: {} });
    const waiting = engine.wait(T, "wc", { timeoutMs: 120_000 });
    await engine.cancel(T, "wc");
    expect(await waiting).toMatchObject({ status: 409, outcome: "canceled", replayed: true });
  });

  it("runOnce with waitInFlightMs answers with the other attempt's result instead of 409", async () => {
    const owner = createEngine({ db: t.connect(3) });
    const retry = createEngine({ db: t.connect(2) });
    const wf = slow();
    const pause = pauseAt(owner, "before:phase:b");
    const running = owner.runOnce(wf, { tenantId: T, key: "r1", input: {} });
    await pause.reached;
    await expect(retry.runOnce(wf, { tenantId: T, key: "r1", input: {} })).rejects.toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
    const waiting = retry.runOnce(wf, { tenantId: T, key: "r1", input: {}, waitInFlightMs: 120_000 });
    pause.resume();
    const first = await running;
    expect(await waiting).toEqual({ ...first, replayed: true });
    pause.clear();
    await expect(retry.runOnce(wf, { tenantId: T, key: "r2", input: {}, waitInFlightMs: -5 })).rejects.toMatchObject({
      code: "invalid_option",
    });
  });

  it("a waiter holds no pooled connection: on a pool of one, other queries go on while it waits", async () => {
    const owner = createEngine({ db: t.connect(3) });
    const single = t.connect(1);
    const waiter = createEngine({ db: single });
    const wf = slow();
    const pause = pauseAt(owner, "before:phase:b");
    const running = owner.runOnce(wf, { tenantId: T, key: "br27", input: {} });
    await pause.reached;
    let settled = false;
    const waiting = waiter.wait(T, "br27", { timeoutMs: 120_000 }).finally(() => {
      settled = true;
    });
    for (let i = 0; i < 5; i++) {
      const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(single);
      expect(rows[0]?.one).toBe(1);
    }
    expect(settled).toBe(false);
    pause.resume();
    await running;
    expect((await waiting).status).toBe(201);
    pause.clear();
  });
});
