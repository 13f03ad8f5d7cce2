/**
 * Faults of the kind "an operator command undoes the engine's guarantees":
 * deleting a run under its live owner (its committed phases then run
 * twice), a release that the owner's next heartbeat renews away, a cancel
 * that waits behind the owner or lets it keep writing. Each verb races a
 * live owner that is paused inside a phase (its transaction open) or a step.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  InputValidationError,
  LeaseLostError,
  RunNotFoundError,
  RunStateError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { deferred, rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 6 });
const LEASE_MS = 600;

beforeAll(async () => {
  await sql`CREATE TABLE op_effects (tenant_id text, key text, item text, attempt int)`.execute(t.db);
});

async function effects(key: string): Promise<string[]> {
  const { rows } = await sql<{ e: string }>`
    SELECT item || '#' || attempt AS e FROM op_effects WHERE key = ${key} ORDER BY item, attempt`.execute(t.db);
  return rows.map((r) => r.e);
}

/**
 * The 3-item workflow: phase p1, step s, phase p2. Each writes an
 * effect row; p2 waits on `gate` inside its open transaction when given.
 */
function threeItems(name: string, gates: { inP2?: Promise<void>; inP2Reached?: () => void } = {}) {
  return workflow(name, { leaseMs: LEASE_MS })
    .phase("p1", async ({ tx, key, attempt }) => {
      await sql`INSERT INTO op_effects VALUES ('t1', ${key}, 'p1', ${attempt})`.execute(tx);
      return { p1: attempt };
    })
    .step("s", async ({ key, attempt }) => {
      await sql`INSERT INTO op_effects VALUES ('t1', ${key}, 's', ${attempt})`.execute(t.db);
      return { s: attempt };
    })
    .phase("p2", async ({ tx, key, attempt }) => {
      await sql`INSERT INTO op_effects VALUES ('t1', ${key}, 'p2', ${attempt})`.execute(tx);
      if (attempt === 1 && gates.inP2 !== undefined) {
        gates.inP2Reached?.();
        await gates.inP2;
      }
      return { p2: attempt };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
}

/** Start a run whose first attempt pauses inside p2 with its transaction open. */
async function pausedInP2(engine: Engine, name: string, key: string) {
  const gate = deferred();
  const reached = deferred();
  const wf = threeItems(name, { inP2: gate.promise, inP2Reached: () => reached.resolve() });
  const owner = engine.runOnce(wf, { tenantId: "t1", key, input: {} }).then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error }),
  );
  await reached.promise;
  return { wf, owner, resume: () => gate.resolve() };
}

describe("forget (keys delete) refuses a live lease unless forced", () => {
  it("a delete while p2 runs is refused and changes nothing: every effect happens once", async () => {
    const engine = createEngine({ db: t.db });
    const run = await pausedInP2(engine, "delete_refused", "del-1");
    const refused = await rejectionOf(engine.forget("t1", "del-1"));
    expect(refused).toBeInstanceOf(RunStateError);
    expect(refused.message).toMatch(/live lease \(owner \w+, \d+ ms left\).*repeat every phase and step/);
    run.resume();
    const { value, error } = await run.owner;
    expect(error).toBeUndefined();
    expect(value).toMatchObject({ status: 201, body: { p1: 1, s: 1, p2: 1 } });
    expect((await engine.runOnce(run.wf, { tenantId: "t1", key: "del-1", input: {} })).replayed).toBe(true);
    expect(await effects("del-1")).toEqual(["p1#1", "p2#1", "s#1"]);
  });

  it("forced, the owner's open phase fails with LeaseLostError and rolls back; the next call starts over (documented repetition)", async () => {
    const engine = createEngine({ db: t.db });
    const run = await pausedInP2(engine, "delete_forced", "del-2");
    const gone = await engine.forget("t1", "del-2", { force: true });
    expect(gone).toMatchObject({ key: "del-2", status: "in_flight", recoveryPoint: "s", history: undefined });
    expect(await engine.inspect("t1", "del-2")).toBeNull();
    run.resume();
    expect((await run.owner).error).toBeInstanceOf(LeaseLostError);
    // p2 of attempt 1 rolled back; the new run repeats p1 and s: what the refusal warns about.
    const again = await engine.runOnce(run.wf, { tenantId: "t1", key: "del-2", input: {} });
    expect(again).toMatchObject({ status: 201, replayed: false });
    expect(await effects("del-2")).toEqual(["p1#1", "p1#1", "p2#1", "s#1", "s#1"]);
  });

  it("a stuck or completed run is deleted without force; an absent key is RunNotFoundError", async () => {
    const engine = createEngine({ db: t.db });
    const wf = threeItems("delete_plain");
    await engine.runOnce(wf, { tenantId: "t1", key: "del-3", input: {} });
    expect(await engine.forget("t1", "del-3")).toMatchObject({ status: "completed" });
    expect(await rejectionOf(engine.forget("t1", "del-3"))).toBeInstanceOf(RunNotFoundError);
  });
});

describe("cancel", () => {
  it("returns while the owner is paused inside a phase with its transaction open; the owner's commit then fails and rolls back", async () => {
    const engine = createEngine({ db: t.db });
    const run = await pausedInP2(engine, "cancel_in_phase", "can-1");
    const canceled = await engine.cancel("t1", "can-1");
    expect(canceled).toMatchObject({
      status: "completed",
      ownerToken: null,
      recoveryPoint: "s",
      response: { status: 409, outcome: "canceled", body: { code: "run_canceled", status: 409 } },
    });
    run.resume();
    expect((await run.owner).error).toBeInstanceOf(LeaseLostError);
    expect(await effects("can-1")).toEqual(["p1#1", "s#1"]);
    const replay = await engine.runOnce(run.wf, { tenantId: "t1", key: "can-1", input: {} });
    expect(replay).toEqual({ status: 409, body: canceled.response?.body, replayed: true, outcome: "canceled" });
    // Canceled is final: a second cancel is refused.
    const again = await rejectionOf(engine.cancel("t1", "can-1"));
    expect(again).toBeInstanceOf(RunStateError);
    expect(again.message).toMatch(/already completed \(outcome canceled\)/);
  });

  it("a live owner's signal aborts at its next renewal; a custom answer is stored and replayed", async () => {
    const engine = createEngine({ db: t.db, heartbeatMs: 50 });
    const stepStarted = deferred();
    let aborted: unknown;
    const wf = workflow("cancel_in_step", { leaseMs: LEASE_MS })
      .step("wait_for_abort", ({ signal }) => {
        stepStarted.resolve();
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => {
            aborted = signal.reason;
            reject(signal.reason);
          });
        });
      })
      .respond(() => ({ status: 200, body: "never" }));
    const owner = rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "can-2", input: {} }));
    await stepStarted.promise;
    await engine.cancel("t1", "can-2", { status: 410, body: { gone: true } });
    expect(await owner).toBeInstanceOf(LeaseLostError);
    expect(aborted).toBeInstanceOf(LeaseLostError);
    expect(await engine.runOnce(wf, { tenantId: "t1", key: "can-2", input: {} })).toEqual({
      status: 410,
      body: { gone: true },
      replayed: true,
      outcome: "canceled",
    });
  });

  it("cancels a parked run; refuses a bad status or body and an absent key", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("cancel_parked")
      .phase("bad", () => ({ n: 1n }))
      .respond(() => ({ status: 200, body: null }));
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "can-3", input: {} }));
    expect(await engine.cancel("t1", "can-3", { status: 422 })).toMatchObject({
      status: "completed",
      parkedReason: null,
      response: { status: 422, outcome: "canceled" },
    });
    expect(await rejectionOf(engine.cancel("t1", "can-4", { status: 99 }))).toBeInstanceOf(InputValidationError);
    expect(await rejectionOf(engine.cancel("t1", "can-4", { body: 1n }))).toBeInstanceOf(InputValidationError);
    expect(await rejectionOf(engine.cancel("t1", "can-4"))).toBeInstanceOf(RunNotFoundError);
  });
});

describe("release ends a live owner's lease for good", () => {
  it("the owner's heartbeat cannot renew it back: its signal aborts, its writes fail, and a retry takes over at once", async () => {
    const engine = createEngine({ db: t.db, heartbeatMs: 50 });
    const stepStarted = deferred();
    const hold = deferred();
    let calls = 0;
    let abortedBy: unknown;
    const wf = workflow("release_live", { leaseMs: 60_000 })
      .step("slow", async ({ signal }) => {
        calls++;
        if (calls === 1) {
          signal.addEventListener("abort", () => {
            abortedBy = signal.reason;
          });
          stepStarted.resolve();
          await hold.promise;
          return { by: "first" };
        }
        return { by: "second" };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const owner = rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rel-1", input: {} }));
    await stepStarted.promise;
    const released = await engine.release("t1", "rel-1");
    expect(released).toMatchObject({ status: "in_flight", ownerToken: null });
    expect(released.leaseRemainingMs ?? 1).toBeLessThanOrEqual(0);
    // The owner's next renewal found the lease gone and aborted its signal, instead of renewing it back.
    await waitFor(async () => (abortedBy === undefined ? undefined : true));
    expect(abortedBy).toBeInstanceOf(LeaseLostError);
    expect(await engine.inspect("t1", "rel-1")).toMatchObject({ ownerToken: null, attempt: 1 });
    const retry = await engine.runOnce(wf, { tenantId: "t1", key: "rel-1", input: {} });
    expect(retry).toMatchObject({ status: 200, body: { by: "second" } });
    hold.resolve();
    expect(await owner).toBeInstanceOf(LeaseLostError);
    expect((await engine.inspect("t1", "rel-1"))?.attempt).toBe(2);
  });

  it("on an already expired lease it keeps locked_until (stuck-for and resume order do not change)", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 200 });
    const wf = threeItems("release_expired");
    setFaultHook(engine, (point) => {
      if (point === "after:phase:p1") throw new CrashSignal(point);
    });
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rel-2", input: {} }));
    setFaultHook(engine, undefined);
    const lockedUntil = async () =>
      (await sql<{ l: string }>`SELECT locked_until::text AS l FROM idempo.runs WHERE key = 'rel-2'`.execute(t.db))
        .rows[0]?.l;
    await waitFor(async () => {
      const rec = await engine.inspect("t1", "rel-2");
      return (rec?.leaseRemainingMs ?? 1) <= 0 ? true : undefined;
    });
    const before = await lockedUntil();
    await engine.release("t1", "rel-2");
    expect(await lockedUntil()).toBe(before);
  });

  it("refuses completed and parked runs (RunStateError) and absent keys (RunNotFoundError)", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(threeItems("release_done"), { tenantId: "t1", key: "rel-3", input: {} });
    expect((await rejectionOf(engine.release("t1", "rel-3"))).message).toMatch(/is completed/);
    const bad = workflow("release_parked")
      .phase("bad", () => ({ n: 1n }))
      .respond(() => ({ status: 200, body: null }));
    await rejectionOf(engine.runOnce(bad, { tenantId: "t1", key: "rel-4", input: {} }));
    const parked = await rejectionOf(engine.release("t1", "rel-4"));
    expect(parked).toBeInstanceOf(RunStateError);
    expect(parked.message).toMatch(/is parked/);
    expect(await rejectionOf(engine.release("t1", "rel-5"))).toBeInstanceOf(RunNotFoundError);
  });
});

describe("retryFrom", () => {
  it("moves a stuck run's recovery point back: the item and everything after it run again, state kept", async () => {
    const engine = createEngine({ db: t.db });
    const wf = threeItems("retry_from_stuck");
    setFaultHook(engine, (point) => {
      if (point === "after:step:s") throw new CrashSignal(point);
    });
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rf-1", input: {} }));
    setFaultHook(engine, undefined);
    // The crashed owner still holds a live lease: refused until it is released.
    const live = await rejectionOf(engine.retryFrom("t1", "rf-1", "p1"));
    expect(live).toBeInstanceOf(RunStateError);
    expect(live.message).toMatch(/live lease/);
    await engine.release("t1", "rf-1");
    const moved = await engine.retryFrom("t1", "rf-1", "s");
    expect(moved).toMatchObject({ status: "in_flight", recoveryPoint: "p1", state: { p1: 1, s: 1 } });
    const done = await engine.runOnce(wf, { tenantId: "t1", key: "rf-1", input: {} });
    expect(done).toMatchObject({ status: 201, body: { p1: 1, s: 2, p2: 2 } });
    expect(await effects("rf-1")).toEqual(["p1#1", "p2#2", "s#1", "s#2"]);
  });

  it("on a parked run it also unparks with a fresh attempt budget", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    let failing = true;
    const wf = workflow("retry_from_parked", { maxAttempts: 1 })
      .phase("a", () => ({ a: 1 }))
      .step("b", () => {
        if (failing) throw new Error("down");
        return { b: 1 };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rf-2", input: {} }));
    await engine.release("t1", "rf-2");
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rf-2", input: {} }));
    expect(await engine.inspect("t1", "rf-2")).toMatchObject({ status: "parked" });
    failing = false;
    const moved = await engine.retryFrom("t1", "rf-2", "a");
    expect(moved).toMatchObject({
      status: "in_flight",
      recoveryPoint: null,
      parkedReason: null,
      attemptsSinceUnpark: 0,
    });
    expect(await engine.runOnce(wf, { tenantId: "t1", key: "rf-2", input: {} })).toMatchObject({ status: 200 });
  });

  it("refuses a completed run, an item not reached yet, and a name that is not in the workflow", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 200 });
    const wf = threeItems("retry_from_refused");
    await engine.runOnce(wf, { tenantId: "t1", key: "rf-3", input: {} });
    expect((await rejectionOf(engine.retryFrom("t1", "rf-3", "p1"))).message).toMatch(/is completed/);
    setFaultHook(engine, (point) => {
      if (point === "after:phase:p1") throw new CrashSignal(point);
    });
    await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "rf-4", input: {} }));
    setFaultHook(engine, undefined);
    await engine.release("t1", "rf-4");
    const ahead = await rejectionOf(engine.retryFrom("t1", "rf-4", "p2"));
    expect(ahead).toBeInstanceOf(RunStateError);
    expect(ahead.message).toMatch(/'p2' has not run yet/);
    const unknown = await rejectionOf(engine.retryFrom("t1", "rf-4", "nope"));
    expect(unknown).toBeInstanceOf(InputValidationError);
    expect(unknown.message).toMatch(/items: p1, s, p2/);
  });
});
