/**
 * A child run (of a `.child` or `.map` item) that calls `ctx.reject`: no
 * client retries a child, and its parent waits for its answer, so the
 * reject ends the child (completed, outcome `failed`, the rejection's
 * status and body stored) instead of deleting its record. The completion
 * wakes the parent, which reads one result per child in input order. A
 * run that is not a child keeps the usual reject: its claim is deleted.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { ORDERS_DDL, useClonedDatabase } from "../../testkit/src/index.ts";
import type { Engine, Worker } from "../src/index.ts";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { sleep } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useClonedDatabase("idempo_child_reject", {
  pool: 8,
  prepare: async (db) => {
    await sql.raw(ORDERS_DDL).execute(db);
  },
});

function worker(engine: Engine, workflows: Parameters<Engine["startWorker"]>[0]["workflows"]): Worker {
  const w = engine.startWorker({ workflows, sweep: false, schedules: false, intervalMs: 50 });
  onTestFinished(() => w.stop());
  return w;
}

const until = async (check: () => boolean | Promise<boolean>, what: string) => {
  // Bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 30_000, interval: 25, message: what }).toBe(true);
};

async function statusOf(tenantId: string, key: string): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status;
}

async function childCount(tenantId: string, parent: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = ${tenantId} AND parent_key = ${parent}`.execute(t.db);
  return rows[0]?.n ?? 0;
}

describe("a child that calls ctx.reject", () => {
  it("map: the parent still gets one result per input, in input order", async () => {
    const engine = createEngine({ db: t.db });
    const others = latch("the other children may finish");
    onTestFinished(() => others.open());
    let rejections = 0;
    const child = workflow("ar_child")
      .input(z.object({ i: z.number().int() }))
      .step("s", async ({ input, reject }) => {
        if (input.i === 0) {
          rejections++;
          reject(400, { problem: "seller 0 is unknown" });
        }
        await others.wait();
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 201, body: state.i }));
    const parent = workflow("ar_parent")
      .map("fan", child, () => [0, 1, 2].map((i) => ({ i })))
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => [r.outcome, r.status, r.body]) }));
    expect((await engine.runOnce(parent, { tenantId: "ar", key: "p1", input: {} })).outcome).toBe("suspended");
    expect(await childCount("ar", "p1")).toBe(3);
    worker(engine, [parent]);
    await until(() => rejections > 0, "child 0 rejects");
    await sleep(300);
    others.open();
    await until(async () => (await statusOf("ar", "p1")) === "completed", "the parent completes");
    const done = await engine.inspect("ar", "p1");
    const body = (done?.status === "completed" ? done.response?.body : undefined) as unknown[] | undefined;
    // One entry per input: the rejection at index 0, child 1's result at index 1, child 2's at index 2.
    expect(body).toEqual([
      ["failed", 400, { problem: "seller 0 is unknown" }],
      ["succeeded", 201, 1],
      ["succeeded", 201, 2],
    ]);
    expect(done?.children).toHaveLength(3);
    expect(rejections).toBe(1);
  });

  it("child: the parent is woken and moves on with the child's answer", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("arc_child")
      .step("s", ({ reject }) => reject(400, { problem: "refused" }))
      .respond(() => ({ status: 201, body: "never" }));
    const parent = workflow("arc_parent")
      .child("only", child, () => ({}))
      .respond(({ state }) => ({ status: 200, body: state.only }));
    await engine.runOnce(parent, { tenantId: "arc", key: "p1", input: {} });
    worker(engine, [parent]);
    await until(async () => (await statusOf("arc", "p1")) === "completed", "the parent completes");
    const done = await engine.inspect("arc", "p1");
    expect(done?.status === "completed" && done.response?.body).toEqual({
      status: 400,
      body: { problem: "refused" },
      outcome: "failed",
    });
    // The child's record stays, completed with the rejection as its stored answer, its step closed as failed.
    const kid = await engine.inspect("arc", deriveChildKey("arc", "p1", "arc_parent", "only", 0));
    expect(kid).toMatchObject({
      status: "completed",
      response: { status: 400, body: { problem: "refused" }, outcome: "failed" },
    });
    expect(kid?.history?.map((h) => [h.kind, h.name, h.outcome])).toEqual([["step", "s", "failed"]]);
  });

  it("a reject in a child's phase rolls the phase's writes back and still ends the child with its answer", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("arp_child")
      .phase("hold", async ({ tx, tenantId, key, reject }) => {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 1)`.execute(
          tx,
        );
        reject(409, { error: "sold_out" });
      })
      .respond(() => ({ status: 201, body: null }));
    const parent = workflow("arp_parent")
      .child("only", child, () => ({}))
      .respond(({ state }) => ({ status: 200, body: state.only }));
    await engine.runOnce(parent, { tenantId: "arp", key: "p1", input: {} });
    worker(engine, [parent]);
    await until(async () => (await statusOf("arp", "p1")) === "completed", "the parent completes");
    const done = await engine.inspect("arp", "p1");
    expect(done?.status === "completed" && done.response?.body).toEqual({
      status: 409,
      body: { error: "sold_out" },
      outcome: "failed",
    });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM orders WHERE tenant_id = 'arp'`.execute(t.db);
    expect(rows[0]?.n).toBe(0);
  });

  it("a child whose first attempt crashed and was released ends with its reject when taken over", async () => {
    const engine = createEngine({ db: t.db });
    let calls = 0;
    const child = workflow("arr_child")
      .step("s", ({ reject }) => {
        calls++;
        return reject(422, { problem: "bad seller" });
      })
      .respond(() => ({ status: 201, body: null }));
    const parent = workflow("arr_parent")
      .child("only", child, () => ({}))
      .respond(({ state }) => ({ status: 200, body: state.only }));
    const kidKey = deriveChildKey("arr", "p1", "arr_parent", "only", 0);
    let crashed = false;
    setFaultHook(engine, (point, run) => {
      if (run.key === kidKey && point === "before:step:s" && !crashed) {
        crashed = true;
        throw new CrashSignal(point);
      }
    });
    onTestFinished(() => setFaultHook(engine, undefined));
    await engine.runOnce(parent, { tenantId: "arr", key: "p1", input: {} });
    worker(engine, [parent]);
    await until(() => crashed, "the child's first attempt crashes");
    await until(async () => (await statusOf("arr", kidKey)) === "in_flight", "the crashed child is in flight");
    await engine.release("arr", kidKey);
    await until(async () => (await statusOf("arr", "p1")) === "completed", "the parent completes");
    const done = await engine.inspect("arr", "p1");
    expect(done?.status === "completed" && done.response?.body).toEqual({
      status: 422,
      body: { problem: "bad seller" },
      outcome: "failed",
    });
    expect(calls).toBe(1);
  });
  it("a rejection body a child cannot store parks the child, as any value over maxPayloadBytes does", async () => {
    const engine = createEngine({ db: t.db, maxPayloadBytes: 1_000 });
    const child = workflow("arb_child")
      .step("s", ({ reject }) => reject(400, { blob: "x".repeat(2_000) }))
      .respond(() => ({ status: 201, body: null }));
    const parent = workflow("arb_parent")
      .child("only", child, () => ({}))
      .respond(({ state }) => ({ status: 200, body: state.only }));
    await engine.runOnce(parent, { tenantId: "arb", key: "p1", input: {} });
    worker(engine, [parent]);
    const kidKey = deriveChildKey("arb", "p1", "arb_parent", "only", 0);
    await until(async () => (await statusOf("arb", kidKey)) === "parked", "the child is parked");
    expect(await statusOf("arb", "p1")).toBe("suspended");
  });
});

describe("a run that is not a child", () => {
  it("an enqueued run's reject still deletes its record, as a claim's does", async () => {
    const engine = createEngine({ db: t.db });
    let rejected = 0;
    const wf = workflow("arn_plain")
      .step("s", ({ reject }) => {
        rejected++;
        return reject(400, { problem: "no" });
      })
      .respond(() => ({ status: 201, body: null }));
    await engine.enqueue(t.db, wf, { tenantId: "arn", key: "k1", input: {} });
    worker(engine, [wf]);
    await until(() => rejected > 0, "the run rejects");
    await until(async () => (await statusOf("arn", "k1")) === undefined, "the record is deleted");
    const res = await engine.runOnce(wf, { tenantId: "arn", key: "k1", input: {} });
    expect(res).toMatchObject({ status: 400, body: { problem: "no" }, outcome: "rejected", replayed: false });
    expect(await statusOf("arn", "k1")).toBeUndefined();
  });
});
