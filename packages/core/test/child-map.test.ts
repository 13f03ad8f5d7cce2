/**
 * `.child` and `.map` end to end on real parallel connections: the parent
 * starts its children in the transaction that records the item's start,
 * suspends holding nothing, workers run the children, the last child's
 * completion makes the parent due, and the parent reads their results in
 * input order. `.map`'s `concurrency` bounds the runnable children (sampled
 * from the database while they run), `timeoutMs` fails the item and
 * cancels the children, and two workers racing on one parent run it once.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, Worker } from "../src/index.ts";
import { createEngine, deriveChildKey, RunStateError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { sleep } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useTestDatabase({ pool: 12 });

function worker(
  engine: Engine,
  opts: Omit<Parameters<Engine["startWorker"]>[0], "sweep"> & { sweep?: boolean },
): Worker {
  const w = engine.startWorker({ sweep: false, intervalMs: 50, ...opts });
  onTestFinished(() => w.stop());
  return w;
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 60_000, interval: 25, message: what }).toBe(true);
};

async function completed(tenantId: string, key: string): Promise<boolean> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status === "completed";
}

/** Effects of the children, by seller: what a provider would count. */
class Effects {
  readonly calls = new Map<string, number>();
  note(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }
}

function transferWorkflow(name: string, effects: Effects, gate?: () => Promise<void>) {
  return workflow(name)
    .input(z.object({ seller: z.string(), cents: z.number().int() }))
    .step("transfer", async ({ input }) => {
      if (gate) await gate();
      effects.note(input.seller);
      return { transferId: `tr-${input.seller}` };
    })
    .respond(({ input, state }) => ({
      status: 201,
      body: { seller: input.seller, id: state.transferId, cents: input.cents },
    }));
}

describe(".map and .child", () => {
  it("fans out, suspends the parent holding nothing, and fans in with typed results in input order", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Effects();
    const transfer = transferWorkflow("cm_transfer", effects);
    const sellers = ["s0", "s1", "s2", "s3", "s4"];
    const payout = workflow("cm_payout")
      .input(z.object({ sellers: z.array(z.string()) }))
      .map("transfers", transfer, ({ input }) => input.sellers.map((seller, i) => ({ seller, cents: 100 * i })))
      .child("receipt", transfer, ({ state }) => ({ seller: "receipt", cents: state.transfers.length }))
      .respond(({ state }) => ({
        status: 200,
        body: {
          ids: state.transfers.map((r) => (r.outcome === "succeeded" ? r.body.id : null)),
          receipt: state.receipt.body,
        },
      }));
    const first = await engine.runOnce(payout, { tenantId: "cm", key: "p1", input: { sellers } });
    expect(first.outcome).toBe("suspended");
    // Suspended on its children: no owner, no lease.
    const parked = await engine.inspect("cm", "p1");
    expect([parked?.status, parked?.ownerToken, parked?.leaseRemainingMs]).toEqual(["suspended", null, null]);
    const { rows: made } = await sql<{ key: string; child_index: number }>`
      SELECT key, child_index FROM idempo.runs WHERE tenant_id = 'cm' AND parent_key = 'p1' AND parent_item = 'transfers'
      ORDER BY child_index`.execute(t.db);
    expect(made.map((r) => r.key)).toEqual(
      sellers.map((_, i) => deriveChildKey("cm", "p1", "cm_payout", "transfers", i)),
    );
    worker(engine, { workflows: [payout] });
    await until(() => completed("cm", "p1"), "the parent completes");
    const done = await engine.runOnce(payout, { tenantId: "cm", key: "p1", input: { sellers } });
    expect(done.body).toEqual({
      ids: sellers.map((s) => `tr-${s}`),
      receipt: { seller: "receipt", id: "tr-receipt", cents: 5 },
    });
    expect([...effects.calls.values()].every((n) => n === 1)).toBe(true);
    expect(effects.calls.size).toBe(6);
  });

  it("never has more than `concurrency` children runnable at once, sampled from the database", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Effects();
    let most = 0;
    const runnable = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs
        WHERE tenant_id = 'cc' AND parent_key = 'p1' AND status <> 'completed'
          AND NOT (status = 'suspended' AND wait_kind IS NOT DISTINCT FROM 'queued')`.execute(t.db);
      const n = rows[0]?.n ?? 0;
      most = Math.max(most, n);
      return n;
    };
    // Each child samples on its own connection while it runs, and stays a while: the others pile up if they can.
    const transfer = transferWorkflow("cc_transfer", effects, async () => {
      await runnable();
      await sleep(30);
    });
    const payout = workflow("cc_payout")
      .map("fan", transfer, () => Array.from({ length: 8 }, (_, i) => ({ seller: `s${i}`, cents: i })), {
        concurrency: 3,
      })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.status) }));
    await engine.runOnce(payout, { tenantId: "cc", key: "p1", input: {} });
    const sampler = setInterval(() => void runnable().catch(() => undefined), 5);
    onTestFinished(() => clearInterval(sampler));
    // Two workers, each able to run all eight at once.
    worker(engine, { workflows: [payout], concurrency: 10 });
    worker(createEngine({ db: t.db }), { workflows: [payout], concurrency: 10 });
    await until(() => completed("cc", "p1"), "the parent completes");
    clearInterval(sampler);
    expect(most).toBe(3);
    expect([...effects.calls.values()]).toEqual(Array(8).fill(1));
    const done = await engine.runOnce(payout, { tenantId: "cc", key: "p1", input: {} });
    expect(done.body).toEqual(Array(8).fill(201));
  });

  it("timeoutMs: the item fails for good with a stored 408 and the children still running are canceled", async () => {
    const engine = createEngine({ db: t.db });
    const stuck = workflow("ct_stuck", { leaseMs: 1_500 })
      .step(
        "wait",
        ({ signal }) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
      )
      .respond(() => ({ status: 200, body: null }));
    const payout = workflow("ct_payout")
      .map("fan", stuck, () => [{}, {}, {}], { concurrency: 2, timeoutMs: 300 })
      .respond(() => ({ status: 200, body: "not reached" }));
    await engine.runOnce(payout, { tenantId: "ct", key: "p1", input: {} });
    worker(engine, { workflows: [payout] });
    await until(() => completed("ct", "p1"), "the parent times out");
    // Its children are canceled right after the parent's completion commits.
    for (const i of [0, 1, 2]) {
      await until(() => completed("ct", deriveChildKey("ct", "p1", "ct_payout", "fan", i)), `child ${i} is canceled`);
    }
    const parent = await engine.inspect("ct", "p1");
    expect(parent?.response?.status).toBe(408);
    expect(parent?.response?.outcome).toBe("failed");
    expect(parent?.response?.body).toMatchObject({ code: "children_timeout" });
    expect(parent?.children?.map((c) => [c.index, c.status, c.outcome])).toEqual([
      [0, "completed", "canceled"],
      [1, "completed", "canceled"],
      [2, "completed", "canceled"],
    ]);
    expect(parent?.history?.find((h) => h.kind === "map")?.outcome).toBe("failed");
  });

  it("cancel of a parent reaches its children that have not completed, running or queued", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Effects();
    const running = latch("child 0 runs");
    const slow = workflow("cx_child", { leaseMs: 1_500 })
      .input(z.object({ seller: z.string() }))
      .step("transfer", async ({ input, signal }) => {
        effects.note(input.seller);
        running.open();
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      })
      .respond(() => ({ status: 200, body: null }));
    const payout = workflow("cx_payout")
      .map("fan", slow, () => [{ seller: "a" }, { seller: "b" }, { seller: "c" }], { concurrency: 1 })
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(payout, { tenantId: "cx", key: "p1", input: {} });
    worker(engine, { workflows: [payout] });
    await running.wait();
    // Never forgotten while its parent waits (unless forced).
    await expect(engine.forget("cx", deriveChildKey("cx", "p1", "cx_payout", "fan", 2))).rejects.toBeInstanceOf(
      RunStateError,
    );
    const canceled = await engine.cancel("cx", "p1");
    expect(canceled.response?.outcome).toBe("canceled");
    const parent = await engine.inspect("cx", "p1");
    expect(parent?.children?.map((c) => [c.index, c.status, c.outcome])).toEqual([
      [0, "completed", "canceled"],
      [1, "completed", "canceled"],
      [2, "completed", "canceled"],
    ]);
    const child = await engine.inspect("cx", deriveChildKey("cx", "p1", "cx_payout", "fan", 1));
    expect(child?.status === "completed" && child.parent).toEqual({ key: "p1", item: "fan", index: 1 });
    await sleep(300);
    // The queued ones never ran; the running one's owner lost it.
    expect([...effects.calls.entries()]).toEqual([["a", 1]]);
  });

  it("the sweeper keeps a completed child while its parent waits, and sweeps it once the parent completed", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Effects();
    const slowGate = latch("the slow child may finish");
    onTestFinished(() => slowGate.open());
    // Expired the moment it completes: only the parent's wait keeps it.
    const child = workflow("cs_child", { retentionMs: 1, tombstoneMs: 0 })
      .input(z.object({ seller: z.string() }))
      .step("transfer", async ({ input }) => {
        if (input.seller === "slow") await slowGate.wait();
        effects.note(input.seller);
        return { id: input.seller };
      })
      .respond(({ state }) => ({ status: 201, body: state.id }));
    const payout = workflow("cs_payout")
      .map("fan", child, () => [{ seller: "fast" }, { seller: "slow" }])
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    await engine.runOnce(payout, { tenantId: "cs", key: "p1", input: {} });
    worker(engine, { workflows: [payout] });
    const fastKey = deriveChildKey("cs", "p1", "cs_payout", "fan", 0);
    await until(() => completed("cs", fastKey), "the fast child completes");
    await sleep(10);
    await engine.sweep();
    const kept = await engine.inspect("cs", fastKey);
    expect(kept?.status).toBe("completed");
    slowGate.open();
    await until(() => completed("cs", "p1"), "the parent completes");
    expect((await engine.runOnce(payout, { tenantId: "cs", key: "p1", input: {} })).body).toEqual(["fast", "slow"]);
    await sleep(10);
    await engine.sweep();
    expect(await engine.inspect("cs", fastKey)).toBeNull();
  });

  it("two workers racing on the same parents run each child once and fan in once", async () => {
    const effects = new Effects();
    const after: string[] = [];
    const transfer = transferWorkflow("cr_transfer", effects);
    const payout = workflow("cr_payout")
      .input(z.object({ n: z.number().int() }))
      .map("fan", transfer, ({ input, key }) =>
        Array.from({ length: input.n }, (_, i) => ({ seller: `${key}-${i}`, cents: i })),
      )
      .step("after", ({ key, state }) => {
        after.push(key);
        return { total: state.fan.length };
      })
      .respond(({ state }) => ({ status: 200, body: state.total }));
    const a = createEngine({ db: t.db });
    const b = createEngine({ db: t.db });
    const keys = ["p1", "p2", "p3"];
    await Promise.all(keys.map((key) => a.enqueue(t.db, payout, { tenantId: "cr", key, input: { n: 6 } })));
    worker(a, { workflows: [payout], concurrency: 6, intervalMs: 10 });
    worker(b, { workflows: [payout], concurrency: 6, intervalMs: 10 });
    for (const key of keys) await until(() => completed("cr", key), `parent ${key} completes`);
    expect(effects.calls.size).toBe(18);
    expect([...effects.calls.values()].every((n) => n === 1)).toBe(true);
    expect(after.sort()).toEqual(keys);
    for (const key of keys) {
      const rec = await a.inspect("cr", key);
      expect(rec?.history?.filter((h) => h.kind === "map").map((h) => h.outcome)).toEqual(["succeeded"]);
      expect(rec?.response?.body).toBe(6);
    }
  });
});
