/**
 * `.parallel` items on a real database: branches run at once, each recorded
 * as it returns with its own derived key; retries per branch; a definitive
 * failure after the running branches settle; the concurrency bound;
 * `ctx.fail` in a branch.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine, deriveStepKey, stepFailureOf, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { latch, meeting } from "./support/latch.ts";

const t = useTestDatabase({ pool: 10 });

class Transient extends Error {}

describe("parallel: branches", () => {
  it("run at once: three branches meet before any returns; each recorded with its own derived key", async () => {
    const engine = createEngine({ db: t.db });
    const all = meeting("all three branches", 3);
    const keys: Record<string, string> = {};
    const branch =
      (name: string) =>
      async ({ idempotencyKey }: { idempotencyKey: string }) => {
        keys[name] = idempotencyKey;
        await all.arrive();
        return { sent: name };
      };
    const wf = workflow("par_overlap")
      .phase("order", () => ({ orderId: "o-1" }))
      .parallel("notify", (p) =>
        p.step("email", branch("email")).step("sms", branch("sms")).step("push", branch("push")),
      )
      .respond(({ state }) => ({ status: 200, body: state }));
    const res = await engine.runOnce(wf, { tenantId: "po", key: "k1", input: {} });
    expect(res.body).toEqual({
      orderId: "o-1",
      notify: { email: { sent: "email" }, sms: { sent: "sms" }, push: { sent: "push" } },
    });
    for (const b of ["email", "sms", "push"])
      expect(keys[b]).toBe(deriveStepKey("po", "k1", "par_overlap", "notify", b));
    expect(new Set(Object.values(keys)).size).toBe(3);
    const rec = await engine.inspect("po", "k1");
    const entries = (rec?.history ?? []).map((h) => [h.kind, h.name, h.branch, h.outcome, h.derivedKey]);
    expect(entries[0]).toEqual(["phase", "order", null, "succeeded", null]);
    // The item's own entry comes first, from its first branch's start.
    expect(entries[1]).toEqual(["parallel", "notify", null, "succeeded", null]);
    expect(entries.slice(2).sort()).toEqual(
      ["email", "push", "sms"].map((b) => ["branch", "notify", b, "succeeded", keys[b]]),
    );
    expect(rec?.definition).toEqual(["phase:order", 'parallel["email","sms","push"]:notify']);
    // The results now live in state only.
    const { rows } = await sql`SELECT 1 FROM idempo.run_history WHERE tenant_id = 'po' AND result IS NOT NULL`.execute(
      t.db,
    );
    expect(rows).toHaveLength(0);
  });

  it("retries per branch: a branch's transient errors are retried with its own options, its tries kept", async () => {
    const engine = createEngine({ db: t.db });
    let flakyCalls = 0;
    let steadyCalls = 0;
    const wf = workflow("par_retries")
      .parallel("fan", (p) =>
        p
          .step(
            "flaky",
            () => {
              flakyCalls++;
              if (flakyCalls < 3) throw new Transient(`503 number ${flakyCalls}`);
              return { ok: flakyCalls };
            },
            { retries: 2, backoffMs: 1, retryable: (e) => e instanceof Transient },
          )
          .step("steady", () => {
            steadyCalls++;
            return "done";
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    const res = await engine.runOnce(wf, { tenantId: "pr", key: "k1", input: {} });
    expect(res.body).toEqual({ flaky: { ok: 3 }, steady: "done" });
    expect([flakyCalls, steadyCalls]).toEqual([3, 1]);
    const history = (await engine.inspect("pr", "k1"))?.history ?? [];
    const flaky = history.find((h) => h.branch === "flaky");
    expect(flaky?.tries?.map((x) => x.error)).toEqual(["503 number 1", "503 number 2", null]);
    expect(history.find((h) => h.branch === "steady")?.tries).toBeNull();
  });

  it("a definitive failure: no further branch starts, the running one settles and stays recorded, then the item fails", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 60_000 });
    const calls = { a: 0, b: 0, c: 0 };
    const aThrew = latch("a threw");
    const bGo = latch("b may return");
    const boom = new Error("card network down");
    const wf = workflow("par_failure")
      .parallel(
        "fan",
        (p) =>
          p
            .step("a", () => {
              calls.a++;
              if (calls.a === 1) {
                aThrew.open();
                throw boom;
              }
              return { a: calls.a };
            })
            .step("b", async () => {
              calls.b++;
              await bGo.wait();
              return { b: calls.b };
            })
            .step("c", () => ({ c: ++calls.c })),
        { concurrency: 2 },
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    let settled = false;
    const first = engine.runOnce(wf, { tenantId: "pf", key: "k1", input: {} });
    first.then(
      () => (settled = true),
      () => (settled = true),
    );
    await aThrew.wait();
    // Two round trips to the database: the item is still waiting for b.
    await engine.inspect("pf", "k1");
    await engine.inspect("pf", "k1");
    expect(settled).toBe(false);
    bGo.open();
    const error = await first.catch((e: unknown) => e);
    expect(error).toBe(boom);
    expect(stepFailureOf(error)).toMatchObject({ workflow: "par_failure", step: "fan", branch: "a", tries: 1 });
    expect(calls).toEqual({ a: 1, b: 1, c: 0 });
    const rec = await engine.inspect("pf", "k1");
    expect(rec?.recoveryPoint).toBeNull();
    const outcomes = (rec?.history ?? []).map((h) => `${h.kind}:${h.branch ?? h.name}:${h.outcome}`);
    expect(outcomes).toEqual(expect.arrayContaining(["branch:a:failed", "branch:b:succeeded", "parallel:fan:failed"]));
    expect(outcomes.some((o) => o.startsWith("branch:c"))).toBe(false);
    // The retry calls a again and c for the first time; b stays recorded.
    await engine.release("pf", "k1");
    const res = await engine.runOnce(wf, { tenantId: "pf", key: "k1", input: {} });
    expect(res.body).toEqual({ a: { a: 2 }, b: { b: 1 }, c: { c: 1 } });
    expect(calls).toEqual({ a: 2, b: 1, c: 1 });
  });

  it("concurrency bounds the branches in flight: six branches, two at a time, in pairs that meet", async () => {
    const engine = createEngine({ db: t.db });
    let inFlight = 0;
    let most = 0;
    const pairs = [meeting("pair 1", 2), meeting("pair 2", 2), meeting("pair 3", 2)];
    const names = ["b0", "b1", "b2", "b3", "b4", "b5"] as const;
    const wf = workflow("par_bound")
      .parallel(
        "fan",
        (p) => {
          let q: typeof p = p;
          names.forEach((name, i) => {
            q = q.step(name, async () => {
              inFlight++;
              most = Math.max(most, inFlight);
              // Launched in declaration order: b0 and b1 meet, then b2 and b3, then b4 and b5.
              await pairs[Math.floor(i / 2)]?.arrive();
              inFlight--;
              return i;
            }) as unknown as typeof p;
          });
          return q;
        },
        { concurrency: 2 },
      )
      .respond(({ state }) => ({ status: 200, body: state }));
    const res = await engine.runOnce(wf, { tenantId: "pb", key: "k1", input: {} });
    expect(res.body).toEqual({ fan: { b0: 0, b1: 1, b2: 2, b3: 3, b4: 4, b5: 5 } });
    expect(most).toBe(2);
  });

  it("ctx.fail in a branch stores its response once the running branches settled", async () => {
    const engine = createEngine({ db: t.db });
    const declined = latch("declined");
    let recorded = 0;
    const wf = workflow("par_fail")
      .parallel("fan", (p) =>
        p
          .step("charge", ({ fail }) => {
            declined.open();
            return fail(402, { code: "card_declined" });
          })
          .step("reserve", async () => {
            await declined.wait();
            recorded++;
            return { held: true };
          }),
      )
      .respond(() => ({ status: 200, body: "never" }));
    const res = await engine.runOnce(wf, { tenantId: "px", key: "k1", input: {} });
    expect(res).toMatchObject({ status: 402, body: { code: "card_declined" }, outcome: "failed" });
    expect(recorded).toBe(1);
    const rec = await engine.inspect("px", "k1");
    expect(rec?.status).toBe("completed");
    const branches = (rec?.history ?? []).filter((h) => h.kind === "branch").map((h) => [h.branch, h.outcome]);
    expect(branches.sort()).toEqual([
      ["charge", "failed"],
      ["reserve", "succeeded"],
    ]);
    expect((await engine.runOnce(wf, { tenantId: "px", key: "k1", input: {} })).replayed).toBe(true);
  });
});
