/**
 * What a parent reads from its children: a failed child does not fail its
 * parent, a parked child keeps it suspended until an operator cancels it,
 * and each result carries the child's outcome, status and body in input
 * order. `retryFrom` onto a map item whose children completed reads them
 * again without running any child twice.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { statusOf, until, worker } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";

const t = useClonedDatabase("idempo_fanout_child_results", { pool: 8 });

describe("what the parent gets from its children", () => {
  it("a failed child and a parked child: the parent waits for the parked one, then reads failed and canceled", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("fcr_child", { maxAttempts: 1, leaseMs: 300 })
      .input(z.object({ mode: z.enum(["ok", "fail", "crash"]) }))
      .step("s", ({ input, fail }) => {
        if (input.mode === "fail") fail(402, { declined: true });
        if (input.mode === "crash") throw new Error("provider down");
        return { ok: true };
      })
      .respond(() => ({ status: 201, body: "ok" }));
    const parent = workflow("fcr_parent")
      .map("fan", child, () => [{ mode: "ok" as const }, { mode: "fail" as const }, { mode: "crash" as const }])
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => [r.outcome, r.status, r.body]) }));
    await engine.runOnce(parent, { tenantId: "fcr", key: "p1", input: {} });
    worker(engine, { workflows: [parent] });
    const crashKey = deriveChildKey("fcr", "p1", "fcr_parent", "fan", 2);
    await until(async () => (await statusOf(t.db, "fcr", crashKey)) === "parked", "the crashing child is parked");
    // The worker keeps polling; a parked child must not make the parent due.
    await sleep(300);
    expect(await statusOf(t.db, "fcr", "p1")).toBe("suspended");
    await engine.cancel("fcr", crashKey);
    await until(async () => (await statusOf(t.db, "fcr", "p1")) === "completed", "the parent completes");
    const rec = await engine.inspect("fcr", "p1");
    const body = rec?.status === "completed" ? rec.response?.body : undefined;
    expect(body).toEqual([
      ["succeeded", 201, "ok"],
      ["failed", 402, { declined: true }],
      ["canceled", 409, expect.objectContaining({ code: "run_canceled" })],
    ]);
  });

  it("retryFrom the map item after a later step failed: the children are read again, none runs twice", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Map<number, number>();
    let planned = 0;
    let afterTries = 0;
    const child = workflow("fcf_child")
      .input(z.object({ i: z.number().int() }))
      .step("s", ({ input }) => {
        effects.set(input.i, (effects.get(input.i) ?? 0) + 1);
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const parent = workflow("fcf_parent")
      .map("fan", child, () => {
        planned++;
        return [0, 1, 2].map((i) => ({ i }));
      })
      .step("after", () => {
        if (++afterTries === 1) throw new Error("ledger down");
        return {};
      })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    await engine.runOnce(parent, { tenantId: "fcf", key: "p1", input: {} });
    for (const i of [0, 1, 2]) {
      const key = deriveChildKey("fcf", "p1", "fcf_parent", "fan", i);
      expect((await engine.runOnce(child, { tenantId: "fcf", key, input: { i } })).status).toBe(200);
    }
    // The parent, due, fans in and fails in the step after the map.
    await expect(engine.runOnce(parent, { tenantId: "fcf", key: "p1", input: {} })).rejects.toThrow("ledger down");
    expect((await engine.inspect("fcf", "p1"))?.recoveryPoint).toBe("fan");
    await engine.release("fcf", "p1");
    expect((await engine.retryFrom("fcf", "p1", "fan")).recoveryPoint).toBeNull();
    expect((await engine.runOnce(parent, { tenantId: "fcf", key: "p1", input: {} })).body).toEqual([0, 1, 2]);
    expect([...effects.values()]).toEqual([1, 1, 1]);
    expect(planned).toBe(1);
  });
});
