/**
 * Fault of the kind "the delivery key names the attempt, not the message":
 * the derived delivery key hashed the run's attempt, so a phase that ran
 * again after a takeover or a `retryFrom` enqueued its messages under new
 * keys, and a receiver that deduplicates on the key sent the email twice.
 * A delivery key names the logical message (tenant, key, run, phase,
 * position): the same on every attempt, takeover and `retryFrom`; only
 * `retryFrom(..., { resendOutbox: true })` mints new ones. A zombie paused
 * in its phase with its message uncommitted still never blocks its
 * successor, which uses the same key.
 */
import { hash } from "node:crypto";
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, LeaseLostError, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { deferred, rejectionOf, sleep } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 8 });

async function rowKeys(tenantId: string, key: string): Promise<string[]> {
  const { rows } = await sql<{ delivery_key: string }>`
    SELECT delivery_key FROM idempo.outbox WHERE tenant_id = ${tenantId} AND key = ${key} ORDER BY message_id
  `.execute(t.db);
  return rows.map((r) => r.delivery_key);
}

/**
 * `notify` enqueues two messages and records the keys `enqueue` returned per
 * attempt; `finish` crashes on the attempts in `crashFinish`.
 */
function notifying(name: string) {
  const seen: { attempt: number; keys: string[] }[] = [];
  const wf = workflow(name)
    .phase("notify", async ({ outbox, attempt }) => {
      const keys = [await outbox.enqueue("receipt.email", { n: 1 }), await outbox.enqueue("order.webhook", { n: 1 })];
      seen.push({ attempt, keys });
      return { notified: attempt };
    })
    .phase("finish", () => ({ finished: true }))
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, seen };
}

/** Crash after `notify` committed, once, so the run stays in flight at recovery point `notify`; then free it. */
async function stuckAfterNotify(engine: Engine, wf: ReturnType<typeof notifying>["wf"], key: string): Promise<void> {
  setFaultHook(engine, (point) => {
    if (point === "after:phase:notify") throw new CrashSignal(point);
  });
  await rejectionOf(engine.runOnce(wf, { tenantId: "dk", key, input: {} }));
  setFaultHook(engine, undefined);
  await engine.release("dk", key);
}

describe("a delivery key names the message, not the attempt", () => {
  it("takeover: a phase rolled back by a crash enqueues under the same keys on the next attempt", async () => {
    const engine = createEngine({ db: t.db });
    const seen: { attempt: number; keys: string[] }[] = [];
    const wf = workflow("dk_takeover")
      .phase("notify", async ({ outbox, attempt }) => {
        const keys = [await outbox.enqueue("receipt.email", { n: 1 }), await outbox.enqueue("order.webhook", {})];
        seen.push({ attempt, keys });
        // The process dies before the phase commits: its rows roll back.
        if (attempt === 1) throw new CrashSignal("inside notify");
        return { notified: attempt };
      })
      .respond(() => ({ status: 201, body: null }));
    await rejectionOf(engine.runOnce(wf, { tenantId: "dk", key: "tk-1", input: {} }));
    await engine.release("dk", "tk-1");
    expect(await engine.runOnce(wf, { tenantId: "dk", key: "tk-1", input: {} })).toMatchObject({ status: 201 });
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    expect(seen[1]?.keys).toEqual(seen[0]?.keys);
    expect(await rowKeys("dk", "tk-1")).toEqual(seen[0]?.keys);
  });

  it("retryFrom: the phase run again enqueues under the keys of its first run", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, seen } = notifying("dk_retry_from");
    await stuckAfterNotify(engine, wf, "rf-1");
    await engine.retryFrom("dk", "rf-1", "notify");
    expect(await engine.runOnce(wf, { tenantId: "dk", key: "rf-1", input: {} })).toMatchObject({ status: 201 });
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    const [first, again] = seen;
    expect(again?.keys).toEqual(first?.keys);
    // Each committed run of the phase left its rows; they carry one key per message.
    const keys = await rowKeys("dk", "rf-1");
    expect(new Set(keys)).toEqual(new Set(first?.keys));
    expect(keys).toHaveLength(4);
  });

  it("retryFrom with resendOutbox mints new keys, and they stay what later reruns use", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, seen } = notifying("dk_resend");
    await stuckAfterNotify(engine, wf, "rs-1");
    await engine.retryFrom("dk", "rs-1", "notify", { resendOutbox: true });
    await stuckAfterNotify(engine, wf, "rs-1");
    await engine.retryFrom("dk", "rs-1", "notify");
    expect(await engine.runOnce(wf, { tenantId: "dk", key: "rs-1", input: {} })).toMatchObject({ status: 201 });
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    const [first, resent, plain] = seen.map((s) => s.keys);
    expect(resent).toHaveLength(2);
    for (const k of resent ?? []) expect(first).not.toContain(k);
    expect(new Set(resent).size).toBe(2);
    // The documented formula: round n's key from round 0's and n.
    expect(resent).toEqual(first?.map((k) => `dlv_${hash("sha256", `${k}:1`, "base64url")}`));
    // A plain retryFrom after the resend keeps the resent keys: the round is stored with the run.
    expect(plain).toEqual(resent);
  });

  it("an explicit delivery key stays the message's key on retryFrom, and no other run can take it", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("dk_explicit")
      .phase("notify", async ({ outbox, key }) => ({
        sent: await outbox.enqueue("receipt.email", {}, { deliveryKey: "receipt-ex-1" }),
        key,
      }))
      .phase("finish", () => ({ finished: true }))
      .respond(({ state }) => ({ status: 201, body: state }));
    setFaultHook(engine, (point) => {
      if (point === "after:phase:notify") throw new CrashSignal(point);
    });
    await rejectionOf(engine.runOnce(wf, { tenantId: "dk", key: "ex-1", input: {} }));
    setFaultHook(engine, undefined);
    await engine.release("dk", "ex-1");
    await engine.retryFrom("dk", "ex-1", "notify", { resendOutbox: true });
    expect(await engine.runOnce(wf, { tenantId: "dk", key: "ex-1", input: {} })).toMatchObject({ status: 201 });
    expect(await rowKeys("dk", "ex-1")).toEqual(["receipt-ex-1", "receipt-ex-1"]);
    await expect(engine.runOnce(wf, { tenantId: "dk", key: "ex-2", input: {} })).rejects.toMatchObject({
      code: "workflow_usage",
      message: expect.stringMatching(/'receipt-ex-1' \(tenant 'dk'\) is already taken by another message/),
    });
    expect(await rowKeys("dk", "ex-2")).toEqual([]);
  });

  it("resendOutbox must be a boolean", async () => {
    const engine = createEngine({ db: t.db });
    await expect(
      engine.retryFrom("dk", "none", "notify", { resendOutbox: "yes" as unknown as boolean }),
    ).rejects.toMatchObject({ code: "invalid_option" });
  });

  it("a key reused after its record is gone is a new run with new keys", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, seen } = notifying("dk_new_run");
    await engine.runOnce(wf, { tenantId: "dk", key: "nr-1", input: {} });
    await engine.forget("dk", "nr-1");
    await engine.runOnce(wf, { tenantId: "dk", key: "nr-1", input: {} });
    const [first, second] = seen.map((s) => s.keys);
    for (const k of second ?? []) expect(first).not.toContain(k);
  });
});

describe("a zombie's uncommitted message never blocks its successor", () => {
  it("the successor commits the same message under the same key while the zombie is paused in its phase", async () => {
    const engine = createEngine({ db: t.db });
    const gate = deferred();
    const reached = deferred();
    const keys: { attempt: number; key: string }[] = [];
    const wf = workflow("dk_zombie")
      .phase("notify", async ({ outbox, attempt }) => {
        keys.push({ attempt, key: await outbox.enqueue("receipt.email", { n: 1 }) });
        if (attempt === 1) {
          reached.resolve();
          await gate.promise;
        }
        return { by: attempt };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const zombie = rejectionOf(engine.runOnce(wf, { tenantId: "dk", key: "z-1", input: {} }));
    onTestFinished(() => gate.resolve());
    await reached.promise;
    await engine.release("dk", "z-1");
    // The successor runs on its own pooled connection while the zombie's transaction stays open.
    const successor = await Promise.race([
      engine.runOnce(wf, { tenantId: "dk", key: "z-1", input: {} }),
      sleep(10_000).then(() => "blocked" as const),
    ]);
    expect(successor).toMatchObject({ status: 201, body: { by: 2 } });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'idle in transaction'`.execute(t.db);
    expect(rows[0]?.n).toBeGreaterThanOrEqual(1); // the zombie's transaction was still open all along
    gate.resolve();
    expect(await zombie).toBeInstanceOf(LeaseLostError);
    expect(keys.map((k) => k.attempt)).toEqual([1, 2]);
    expect(keys[1]?.key).toBe(keys[0]?.key);
    expect(await rowKeys("dk", "z-1")).toEqual([keys[0]?.key]);
  });
});
