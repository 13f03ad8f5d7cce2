/**
 * Child runs under crashes: the children are created in the transaction
 * that records the item's start and suspends the parent, so a crash before
 * that commit leaves no child (the next attempt creates them, under the
 * same keys) and a crash after it leaves them all, once; neither way does
 * a child start twice or go missing.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { crashAt } from "./support/faults.ts";

const t = useTestDatabase({ pool: 10 });

function worker(engine: Engine, workflows: Parameters<Engine["startWorker"]>[0]["workflows"]): void {
  const w = engine.startWorker({ workflows, sweep: false, intervalMs: 50 });
  onTestFinished(() => w.stop());
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 60_000, interval: 25, message: what }).toBe(true);
};

async function childKeys(tenantId: string, parent: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT key FROM idempo.runs WHERE tenant_id = ${tenantId} AND parent_key = ${parent} ORDER BY child_index
  `.execute(t.db);
  return rows.map((r) => r.key);
}

async function completed(tenantId: string, key: string): Promise<boolean> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status === "completed";
}

function fanOut(prefix: string, effects: Map<string, number>) {
  const child = workflow(`${prefix}_child`)
    .input(z.object({ n: z.number().int() }))
    .step("effect", ({ input, idempotencyKey }) => {
      effects.set(idempotencyKey, (effects.get(idempotencyKey) ?? 0) + 1);
      return { doubled: input.n * 2 };
    })
    .respond(({ state }) => ({ status: 200, body: state.doubled }));
  return workflow(`${prefix}_parent`)
    .map("fan", child, () => [1, 2, 3, 4].map((n) => ({ n })))
    .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
}

describe("child runs: crashes around the start", () => {
  it("a crash inside the start transaction leaves no child; the next attempt creates each once", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Map<string, number>();
    const parent = fanOut("cc1", effects);
    const crash = crashAt(engine, "started:map:fan");
    onTestFinished(() => crash.clear());
    await expect(engine.runOnce(parent, { tenantId: "k1", key: "p", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    // Rolled back with the parent's start: nothing to run twice.
    expect(await childKeys("k1", "p")).toEqual([]);
    crash.clear();
    await engine.release("k1", "p");
    const again = await engine.runOnce(parent, { tenantId: "k1", key: "p", input: {} });
    expect(again.outcome).toBe("suspended");
    expect(await childKeys("k1", "p")).toEqual(
      [0, 1, 2, 3].map((i) => deriveChildKey("k1", "p", "cc1_parent", "fan", i)),
    );
    worker(engine, [parent]);
    await until(() => completed("k1", "p"), "the parent completes");
    expect((await engine.runOnce(parent, { tenantId: "k1", key: "p", input: {} })).body).toEqual([2, 4, 6, 8]);
    expect([...effects.values()]).toEqual([1, 1, 1, 1]);
  });

  it("a crash right after the start committed leaves every child once and the parent suspended, holding nothing", async () => {
    const engine = createEngine({ db: t.db });
    const effects = new Map<string, number>();
    const parent = fanOut("cc2", effects);
    const crash = crashAt(engine, "after:map:fan");
    onTestFinished(() => crash.clear());
    await expect(engine.runOnce(parent, { tenantId: "k2", key: "p", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    crash.clear();
    const keys = await childKeys("k2", "p");
    expect(keys).toHaveLength(4);
    const rec = await engine.inspect("k2", "p");
    expect([rec?.status, rec?.ownerToken]).toEqual(["suspended", null]);
    // Another process finds the parent as it was left, and the retry of the caller does not start anything again.
    const other = createEngine({ db: t.db });
    const retry = await other.runOnce(parent, { tenantId: "k2", key: "p", input: {} }).catch((e: unknown) => e);
    expect(retry).toBeDefined();
    worker(other, [parent]);
    await until(() => completed("k2", "p"), "the parent completes");
    expect(await childKeys("k2", "p")).toEqual(keys);
    expect((await other.runOnce(parent, { tenantId: "k2", key: "p", input: {} })).body).toEqual([2, 4, 6, 8]);
    expect([...effects.values()]).toEqual([1, 1, 1, 1]);
  });

  it("a crash of the parent while it reads its children's results: the takeover reads them again and moves on once", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 600, heartbeatMs: 100 });
    const effects = new Map<string, number>();
    const parent = fanOut("cc3", effects);
    await engine.runOnce(parent, { tenantId: "k3", key: "p", input: {} });
    // The fan-in visit (the parent's attempt after the wake-up) crashes after reading the results, before its commit.
    let fired = 0;
    setFaultHook(engine, (point, run) => {
      if (point === "read:map:fan" && run.key === "p" && fired === 0) {
        fired++;
        throw new CrashSignal(point);
      }
    });
    onTestFinished(() => setFaultHook(engine, undefined));
    worker(engine, [parent]);
    await until(() => completed("k3", "p"), "the parent completes after its takeover");
    expect(fired).toBe(1);
    expect((await engine.runOnce(parent, { tenantId: "k3", key: "p", input: {} })).body).toEqual([2, 4, 6, 8]);
    expect([...effects.values()]).toEqual([1, 1, 1, 1]);
    const rec = await engine.inspect("k3", "p");
    expect(rec?.history?.filter((h) => h.kind === "map").map((h) => h.outcome)).toEqual(["succeeded"]);
  });
});
