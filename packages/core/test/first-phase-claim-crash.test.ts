/**
 * A crash around the first phase's commit, which also commits the claim:
 * before it nothing is recorded (a retry is a first attempt), after it the
 * run resumes from its recovery point. And the wait of a duplicate on that
 * phase is bounded by the phase's lock timeout.
 */
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { EngineOptions } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { countOrders, historyOf } from "./support/effects.ts";
import { crashAt, waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 6 });
const T = "acme";

/** An engine that made its first claim (which goes alone, reading the driver): the next ones fold. */
async function warmEngine(options: EngineOptions<unknown>) {
  const engine = createEngine(options);
  const warm = workflow("fp_warm").respond(() => ({ status: 200, body: null }));
  await engine.runOnce(warm, { tenantId: "warm", key: randomUUID(), input: {} });
  return engine;
}

function twoPhases(name: string, crashInFirst: { times: number }) {
  const counts = { first: 0, second: 0 };
  const wf = workflow(name)
    .phase("create_order", async ({ tx, tenantId, key }) => {
      counts.first++;
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${randomUUID()}, ${tenantId}, ${key}, 10)`.execute(
        tx,
      );
      // A crash after the phase's writes and before its commit (the claim's commit too).
      if (crashInFirst.times-- > 0) throw new CrashSignal("inside:phase:create_order");
      return { order: true };
    })
    .phase("finish", async () => {
      counts.second++;
      return {};
    })
    .respond(() => ({ status: 201, body: { ok: true } }));
  return { wf, counts };
}

describe("a crash around the folded commit", () => {
  it("before it: no record and no order; the retry is a first attempt that runs every phase once", async () => {
    const engine = await warmEngine({ db: t.db });
    const { wf, counts } = twoPhases("fpc_before", { times: 1 });
    const call = () => engine.runOnce(wf, { tenantId: T, key: "c-before", input: {} });
    expect(await call().catch((e: unknown) => e)).toBeInstanceOf(CrashSignal);
    expect(await engine.inspect(T, "c-before")).toBeNull();
    expect(await countOrders(t.db, { cartId: "c-before" })).toBe(0);
    // No lease to wait out: the retry runs at once.
    expect(await call()).toMatchObject({ status: 201, replayed: false });
    expect(await countOrders(t.db, { cartId: "c-before" })).toBe(1);
    expect(await engine.inspect(T, "c-before")).toMatchObject({ status: "completed", attempt: 1 });
    expect(await historyOf(engine, T, "c-before")).toEqual(["create_order:1:succeeded", "finish:1:succeeded"]);
    expect(counts).toEqual({ first: 2, second: 1 });
  });

  it("after it: the record is at the first phase's recovery point, and a retry resumes from there", async () => {
    const engine = await warmEngine({ db: t.db, leaseMs: 30_000 });
    const { wf, counts } = twoPhases("fpc_after", { times: 0 });
    const crash = crashAt(engine, "after:phase:create_order", { key: "c-after" });
    const call = () => engine.runOnce(wf, { tenantId: T, key: "c-after", input: {} });
    expect(await call().catch((e: unknown) => e)).toBeInstanceOf(CrashSignal);
    expect(crash.fired).toBe(1);
    expect(await engine.inspect(T, "c-after")).toMatchObject({ status: "in_flight", recoveryPoint: "create_order" });
    expect(await call().catch((e: unknown) => e)).toBeInstanceOf(IdempotencyKeyInProgressError);
    await engine.release(T, "c-after");
    expect(await call()).toMatchObject({ status: 201, replayed: false });
    expect(counts).toEqual({ first: 1, second: 1 });
    expect(await countOrders(t.db, { cartId: "c-after" })).toBe(1);
    expect(await historyOf(engine, T, "c-after")).toEqual(["create_order:1:succeeded", "finish:2:succeeded"]);
  });
});

describe("the duplicate's wait on a first phase", () => {
  it("is bounded by the phase's lock timeout: past it the duplicate gets 409, and the holder finishes", async () => {
    const engine = await warmEngine({ db: t.db });
    let open!: () => void;
    const hold = new Promise<void>((r) => {
      open = r;
    });
    let started = 0;
    const wf = workflow("fpc_bound", { lockTimeoutMs: 200 })
      .phase("slow", async ({ tx }) => {
        started++;
        await sql`SELECT 1`.execute(tx);
        if (started === 1) await hold;
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const first = engine.runOnce(wf, { tenantId: T, key: "c-bound", input: {} });
    await waitFor(async () => (started === 1 ? true : undefined));
    const dup = await engine.runOnce(wf, { tenantId: T, key: "c-bound", input: {} }).catch((e: unknown) => e);
    expect(dup).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect((dup as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
    open();
    expect(await first).toMatchObject({ status: 200, replayed: false });
    expect(started).toBe(1);
  });
});
