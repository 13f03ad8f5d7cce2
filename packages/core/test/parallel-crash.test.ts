/**
 * `.parallel` items under crashes, in-doubt branches, takeovers and
 * retryFrom: a branch recorded once is never called again, an unrecorded
 * one is called again with the same derived key (or reconciled), and a
 * zombie's late branch result is refused.
 */
import { describe, expect, it, onTestFinished } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, deriveStepKey, LeaseLostError, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook, setHeartbeatSilenced } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitForLeaseExpiry } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useTestDatabase({ pool: 10 });

/** Calls per branch, with the derived keys they carried. */
class Calls {
  readonly keys: Record<string, string[]> = {};
  note(branch: string, key: string): void {
    const keys = this.keys[branch] ?? [];
    keys.push(key);
    this.keys[branch] = keys;
  }
  count(branch: string): number {
    return this.keys[branch]?.length ?? 0;
  }
}

function hooked(engine: Engine, hook: Parameters<typeof setFaultHook>[1]): void {
  setFaultHook(engine, hook);
  onTestFinished(() => setFaultHook(engine, undefined));
}

describe("parallel: crashes and takeovers", () => {
  it("a crash after two of three branches recorded calls only the third again, with the same key", async () => {
    const engine = createEngine({ db: t.db });
    const calls = new Calls();
    const cFirst = latch("the first call of c returns");
    const cCalled = latch("the first call of c began");
    onTestFinished(() => cFirst.open());
    const wf = workflow("par_crash")
      .parallel("fan", (p) =>
        p
          .step("a", ({ idempotencyKey }) => {
            calls.note("a", idempotencyKey);
            return { a: 1 };
          })
          .step("b", ({ idempotencyKey }) => {
            calls.note("b", idempotencyKey);
            return { b: 2 };
          })
          .step("c", async ({ idempotencyKey, attempt, signal }) => {
            calls.note("c", idempotencyKey);
            if (attempt === 1) cCalled.open();
            // The first attempt's call is still under way when its process dies.
            if (attempt === 1)
              await Promise.race([cFirst.wait(), new Promise((r) => signal.addEventListener("abort", r))]);
            return { c: attempt };
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    let recorded = 0;
    hooked(engine, async (point, run) => {
      if (run.attempt !== 1 || (point !== "after:branch:fan/a" && point !== "after:branch:fan/b")) return;
      if (++recorded < 2) return;
      // a and b are recorded, c has been called: the process dies now.
      await cCalled.wait();
      throw new CrashSignal(point);
    });
    await expect(engine.runOnce(wf, { tenantId: "pc", key: "k1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    const crashed = await engine.inspect("pc", "k1");
    expect(
      crashed?.history
        ?.filter((h) => h.outcome === "succeeded")
        .map((h) => h.branch)
        .sort(),
    ).toEqual(["a", "b"]);
    await engine.release("pc", "k1");
    const res = await engine.runOnce(wf, { tenantId: "pc", key: "k1", input: {} });
    expect(res.body).toEqual({ a: { a: 1 }, b: { b: 2 }, c: { c: 2 } });
    expect([calls.count("a"), calls.count("b"), calls.count("c")]).toEqual([1, 1, 2]);
    const cKey = deriveStepKey("pc", "k1", "par_crash", "fan", "c");
    expect(calls.keys.c).toEqual([cKey, cKey]);
    const cEntries = (await engine.inspect("pc", "k1"))?.history?.filter((h) => h.branch === "c");
    expect(cEntries?.map((h) => [h.attempt, h.outcome, h.derivedKey])).toEqual([
      [1, "interrupted", cKey],
      [2, "succeeded", cKey],
    ]);
  });

  it("an in-doubt branch (called, result not recorded) is reconciled instead of called again", async () => {
    const engine = createEngine({ db: t.db });
    const calls = new Calls();
    const asked: string[] = [];
    const bRecorded = latch("b recorded");
    const sent = new Map<string, string>(); // the provider's side: what each key created
    const wf = workflow("par_reconcile")
      .parallel("fan", (p) =>
        p
          .step(
            "a",
            async ({ idempotencyKey, attempt }) => {
              calls.note("a", idempotencyKey);
              if (attempt === 1) await bRecorded.wait();
              sent.set(idempotencyKey, "msg-1");
              return { id: "msg-1" };
            },
            {
              reconcile: ({ idempotencyKey }) => {
                asked.push(idempotencyKey);
                const id = sent.get(idempotencyKey);
                return id === undefined ? undefined : { id };
              },
            },
          )
          .step("b", ({ idempotencyKey }) => {
            calls.note("b", idempotencyKey);
            return { id: "b-1" };
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    hooked(engine, (point, run) => {
      if (point === "after:branch:fan/b") bRecorded.open();
      if (point === "called:branch:fan/a" && run.attempt === 1) throw new CrashSignal(point);
    });
    await expect(engine.runOnce(wf, { tenantId: "pr", key: "k1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    await engine.release("pr", "k1");
    const res = await engine.runOnce(wf, { tenantId: "pr", key: "k1", input: {} });
    expect(res.body).toEqual({ a: { id: "msg-1" }, b: { id: "b-1" } });
    const aKey = deriveStepKey("pr", "k1", "par_reconcile", "fan", "a");
    expect(asked).toEqual([aKey]);
    expect([calls.count("a"), calls.count("b")]).toEqual([1, 1]);
    const a = (await engine.inspect("pr", "k1"))?.history?.filter((h) => h.branch === "a");
    expect(a?.map((h) => [h.attempt, h.outcome])).toEqual([
      [1, "interrupted"],
      [2, "reconciled"],
    ]);
  });

  it("a takeover after the lease expired mid-parallel calls only the unrecorded branch; the zombie's result is refused", async () => {
    const zombieEngine = createEngine({ db: t.db, leaseMs: 400 });
    const successor = createEngine({ db: t.connect(4), leaseMs: 30_000 });
    setHeartbeatSilenced(zombieEngine, true);
    const calls = new Calls();
    const zombieC = latch("the zombie's call of c returns");
    const zombieCalledC = latch("the zombie called c");
    const recorded = { a: latch("the zombie recorded a"), b: latch("the zombie recorded b") };
    hooked(zombieEngine, (point) => {
      if (point === "after:branch:fan/a") recorded.a.open();
      if (point === "after:branch:fan/b") recorded.b.open();
    });
    onTestFinished(() => zombieC.open());
    const wf = workflow("par_takeover")
      .parallel("fan", (p) =>
        p
          .step("a", ({ idempotencyKey }) => {
            calls.note("a", idempotencyKey);
            return "a";
          })
          .step("b", ({ idempotencyKey }) => {
            calls.note("b", idempotencyKey);
            return "b";
          })
          .step("c", async ({ idempotencyKey, attempt }) => {
            calls.note("c", idempotencyKey);
            if (attempt === 1) zombieCalledC.open();
            if (attempt === 1) await zombieC.wait(); // ignores its signal, as slow code does
            return `c from attempt ${attempt}`;
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    const zombie = zombieEngine.runOnce(wf, { tenantId: "pt", key: "k1", input: {} });
    const zombieSettled = zombie.catch((e: unknown) => e);
    await Promise.all([recorded.a.wait(), recorded.b.wait(), zombieCalledC.wait()]);
    await waitForLeaseExpiry(successor, "pt", "k1", 20_000);
    const res = await successor.runOnce(wf, { tenantId: "pt", key: "k1", input: {} });
    expect(res.body).toEqual({ a: "a", b: "b", c: "c from attempt 2" });
    zombieC.open();
    expect(await zombieSettled).toBeInstanceOf(LeaseLostError);
    expect([calls.count("a"), calls.count("b"), calls.count("c")]).toEqual([1, 1, 2]);
    const cKey = deriveStepKey("pt", "k1", "par_takeover", "fan", "c");
    expect(calls.keys.c).toEqual([cKey, cKey]);
    const rec = await successor.inspect("pt", "k1");
    expect(rec?.status).toBe("completed");
    expect(rec?.history?.filter((h) => h.branch === "c").map((h) => [h.attempt, h.outcome])).toEqual([
      [1, "interrupted"],
      [2, "succeeded"],
    ]);
  });

  it("retryFrom onto a parallel item calls every branch again, with the same keys", async () => {
    const engine = createEngine({ db: t.db });
    const calls = new Calls();
    let shipTries = 0;
    const wf = workflow("par_retry_from")
      .parallel("fan", (p) =>
        p
          .step("a", ({ idempotencyKey }) => {
            calls.note("a", idempotencyKey);
            return calls.count("a");
          })
          .step("b", ({ idempotencyKey }) => {
            calls.note("b", idempotencyKey);
            return calls.count("b");
          }),
      )
      .phase("ship", () => {
        if (++shipTries === 1) throw new Error("warehouse down");
        return {};
      })
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    await expect(engine.runOnce(wf, { tenantId: "pf", key: "k1", input: {} })).rejects.toThrow("warehouse down");
    await engine.release("pf", "k1");
    const rewound = await engine.retryFrom("pf", "k1", "fan");
    expect(rewound.recoveryPoint).toBeNull();
    const res = await engine.runOnce(wf, { tenantId: "pf", key: "k1", input: {} });
    expect(res.body).toEqual({ a: 2, b: 2 });
    for (const b of ["a", "b"]) {
      const key = deriveStepKey("pf", "k1", "par_retry_from", "fan", b);
      expect(calls.keys[b]).toEqual([key, key]);
    }
  });

  it("retryFrom an earlier item forgets what an unfinished parallel item recorded: it runs again whole", async () => {
    const engine = createEngine({ db: t.db });
    const calls = new Calls();
    const wf = workflow("par_rewind_partial")
      .phase("order", () => ({ orderId: "o-1" }))
      .parallel("fan", (p) =>
        p
          .step("a", ({ idempotencyKey }) => {
            calls.note("a", idempotencyKey);
            return calls.count("a");
          })
          .step("b", ({ idempotencyKey }) => {
            calls.note("b", idempotencyKey);
            if (calls.count("b") === 1) throw new Error("sms gateway down");
            return calls.count("b");
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    await expect(engine.runOnce(wf, { tenantId: "pw", key: "k1", input: {} })).rejects.toThrow("sms gateway down");
    expect((await engine.inspect("pw", "k1"))?.recoveryPoint).toBe("order");
    await engine.release("pw", "k1");
    await engine.retryFrom("pw", "k1", "order");
    const res = await engine.runOnce(wf, { tenantId: "pw", key: "k1", input: {} });
    // Without the rewind, a (recorded in the first attempt) would have been kept: { a: 1, b: 2 }.
    expect(res.body).toEqual({ a: 2, b: 2 });
  });
});
