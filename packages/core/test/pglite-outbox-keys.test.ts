/**
 * Outbox delivery keys and step tries on embedded PGlite, and what runs
 * beside them on the one connection: a retried phase keeps or derives its
 * messages' delivery keys, a schedule catches up its missed ticks, and a
 * parallel item's branches overlap and resume after a crash.
 */
import { createHash } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import type { TestDb } from "./support/db.ts";
import { openPGlite } from "./support/pglite.ts";

const T = "acme";
let db: TestDb;

beforeAll(async () => {
  ({ db } = await openPGlite());
}, 300_000);
afterAll(async () => {
  await db?.destroy();
});

describe("PGlite: outbox keys and step tries", () => {
  it("retryFrom keeps a message's delivery key, resendOutbox derives the next round's; a retried step keeps its tries", async () => {
    const engine = createEngine({ db });
    const keys: string[] = [];
    let calls = 0;
    const wf = workflow("pg_outbox_keys")
      .phase("notify", async ({ outbox }) => {
        keys.push(await outbox.enqueue("receipt.email", {}));
        return {};
      })
      .step(
        "charge",
        () => {
          if (++calls === 1) throw new Error("transient");
          return { charged: true };
        },
        { retries: 1, retryable: () => true, backoffMs: 1, maxBackoffMs: 1 },
      )
      .respond(() => ({ status: 201, body: null }));
    const crashing = createEngine({ db });
    setFaultHook(crashing, (point) => {
      if (point === "after:phase:notify") throw new CrashSignal(point);
    });
    await crashing.runOnce(wf, { tenantId: T, key: "ob-1", input: {} }).catch(() => undefined);
    await engine.release(T, "ob-1");
    await engine.retryFrom(T, "ob-1", "notify", { resendOutbox: true });
    await crashing.runOnce(wf, { tenantId: T, key: "ob-1", input: {} }).catch(() => undefined);
    await engine.release(T, "ob-1");
    await engine.retryFrom(T, "ob-1", "notify");
    expect(await engine.runOnce(wf, { tenantId: T, key: "ob-1", input: {} })).toMatchObject({ status: 201 });
    const resent = `dlv_${createHash("sha256").update(`${keys[0]}:1`).digest("base64url")}`;
    expect(keys).toEqual([keys[0], resent, resent]);
    const step = (await engine.inspect(T, "ob-1"))?.history?.find((h) => h.kind === "step");
    expect(step?.tries?.map((x) => x.error)).toEqual(["transient", null]);
  });

  it("a schedule fires on PGlite: ticks missed while no worker ran are caught up, one run each", async () => {
    const engine = createEngine({ db });
    const wf = workflow("pglite_schedule")
      .input(z.object({ schedule: z.string(), at: z.string() }))
      .phase("p", ({ input }) => ({ at: input.at }))
      .respond(({ state }) => ({ status: 200, body: state }));
    await engine.schedule("pglite-yearly", { cron: "0 0 1 1 *", workflow: wf, tenantId: T, catchUp: "all" });
    await sql`UPDATE idempo.schedules SET next_tick_at = '2024-01-01T00:00:00Z' WHERE name = 'pglite-yearly'`.execute(
      db,
    );
    const worker = engine.startWorker({ workflows: [wf], intervalMs: 100, sweep: false });
    try {
      const years = ["2024", "2025", "2026"];
      const keys = years.map((y) => `schedule:pglite-yearly:${y}-01-01T00:00:00.000Z`);
      const done = async () => (await Promise.all(keys.map((k) => engine.inspect(T, k)))).map((r) => r?.status);
      await expect.poll(done, { timeout: 120_000 }).toEqual(["completed", "completed", "completed"]);
      for (const [i, y] of years.entries()) {
        expect((await engine.inspect(T, keys[i] as string))?.response?.body).toEqual({
          at: `${y}-01-01T00:00:00.000Z`,
        });
      }
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs WHERE key LIKE 'schedule:pglite-yearly:%'`.execute(db);
      expect(rows[0]?.n).toBe(3);
    } finally {
      await worker.stop();
    }
  });

  it("a parallel item's branches overlap on the one connection; a crash after one recorded calls only the other again", async () => {
    const engine = createEngine({ db, leaseMs: 30_000 });
    let aCalls = 0;
    let bCalls = 0;
    let bothIn!: () => void;
    const met = new Promise<void>((r) => {
      bothIn = r;
    });
    let inside = 0;
    const meet = async () => {
      if (++inside === 2) bothIn();
      await met;
    };
    const wf = workflow("pglite_parallel")
      .parallel("fan", (p) =>
        p
          .step("a", async () => {
            aCalls++;
            if (aCalls === 1) await meet();
            return { a: aCalls };
          })
          .step("b", async () => {
            bCalls++;
            if (bCalls === 1) await meet();
            return { b: bCalls };
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    let aRecorded!: () => void;
    const recordedA = new Promise<void>((r) => {
      aRecorded = r;
    });
    setFaultHook(engine, async (point) => {
      if (point === "after:branch:fan/a") aRecorded();
      if (point !== "called:branch:fan/b") return;
      await recordedA;
      throw new CrashSignal(point);
    });
    await expect(engine.runOnce(wf, { tenantId: T, key: "par-1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    setFaultHook(engine, undefined);
    await engine.release(T, "par-1");
    const res = await engine.runOnce(wf, { tenantId: T, key: "par-1", input: {} });
    expect(res.body).toEqual({ a: { a: 1 }, b: { b: 2 } });
    expect([aCalls, bCalls]).toEqual([1, 2]);
  });
});
