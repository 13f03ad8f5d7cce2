/**
 * `retryFrom` on a parent whose `.map` item started children: the children
 * are kept and never started again. The rewound item derives the same keys,
 * finds them, waits for those still running and reads the results of those
 * that completed: no duplicate effect, no lost intent.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { latch } from "./support/latch.ts";

const t = useTestDatabase({ pool: 8 });

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 60_000, interval: 25, message: what }).toBe(true);
};

async function statusOf(key: string): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = 'rf' AND key = ${key}`.execute(t.db);
  return rows[0]?.status;
}

describe("retryFrom on a parent", () => {
  it("rewinding before a map item reuses its children: each runs once, the parent reads their results", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Map<number, number>();
    const gate = latch("the second child may finish");
    onTestFinished(() => gate.open());
    let prepared = 0;
    const child = workflow("rf_child")
      .input(z.object({ i: z.number().int() }))
      .step("effect", async ({ input }) => {
        effects.set(input.i, (effects.get(input.i) ?? 0) + 1);
        if (input.i === 1) await gate.wait();
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const parent = workflow("rf_parent")
      .phase("prepare", () => {
        prepared++;
        return { n: 3 };
      })
      .map("fan", child, ({ state }) => Array.from({ length: state.n }, (_, i) => ({ i })))
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    await engine.runOnce(parent, { tenantId: "rf", key: "p", input: {} });
    const w = engine.startWorker({ workflows: [parent], sweep: false, intervalMs: 50 });
    onTestFinished(() => w.stop());
    await until(async () => effects.size === 3, "every child started");
    // The parent waits on its children; the operator runs it again from the start.
    await engine.retryFrom("rf", "p", "prepare");
    await until(async () => prepared === 2 && (await statusOf("p")) === "suspended", "the rewound parent waits again");
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = 'rf' AND parent_key = 'p'`.execute(t.db);
    expect(rows[0]?.n).toBe(3);
    gate.open();
    await until(async () => (await statusOf("p")) === "completed", "the parent completes");
    expect((await engine.runOnce(parent, { tenantId: "rf", key: "p", input: {} })).body).toEqual([0, 1, 2]);
    expect([...effects.entries()].sort()).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
    ]);
  });

  it("a parent key reused after its retention starts new children, replacing the earlier run's kept ones", async () => {
    const engine = createEngine({ db: t.db });
    let calls = 0;
    const child = workflow("rk_child")
      .step("effect", () => ({ call: ++calls }))
      .respond(({ state }) => ({ status: 200, body: state.call }));
    const parent = workflow("rk_parent", { retentionMs: 1, tombstoneMs: 0 })
      .map("fan", child, () => [{}, {}])
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    const w = engine.startWorker({ workflows: [parent], sweep: false, intervalMs: 50 });
    onTestFinished(() => w.stop());
    await engine.runOnce(parent, { tenantId: "rf", key: "rk", input: {} });
    await until(async () => (await statusOf("rk")) === "completed", "the first run completes");
    const firstRun = (await engine.inspect("rf", "rk"))?.runId;
    // Past the parent's retention, the key names a new run; the children's records (24 h) are still kept.
    await expect
      .poll(async () => (await engine.runOnce(parent, { tenantId: "rf", key: "rk", input: {} })).outcome, {
        timeout: 10_000,
      })
      .toBe("suspended");
    const second = await engine.inspect("rf", "rk");
    expect(second?.runId).not.toBe(firstRun);
    await until(async () => (await statusOf("rk")) === "completed", "the second run completes");
    const done = await engine.inspect("rf", "rk");
    const bodies = (done?.status === "completed" ? (done.response?.body ?? []) : []) as number[];
    expect([...bodies].sort()).toEqual([3, 4]);
    expect(done?.children?.length).toBe(2);
  });
});
