/**
 * What `retryFrom` and a takeover do to a `.waitFor`'s deadline and to the
 * signals already delivered. `retryFrom` re-arms the deadlines of the waits
 * it rewinds: a rewound timed wait gets a fresh timeout from the moment it
 * runs again, instead of timing out at once on the deadline of its first
 * pass. Signals already delivered stay delivered and are read again. A
 * takeover keeps the deadline as it is, so restarts never extend a wait.
 */
import { sql } from "kysely";
import { expect, it } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { requestFingerprint } from "../src/json/fingerprint.ts";
import { useTestDatabase } from "./support/db.ts";
import { crashAt, waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

async function dbNow(): Promise<number> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return (rows[0] as { now: Date }).now.getTime();
}

function confirmation(name: string, timeoutMs: number) {
  const calls = { charge: 0, capture: 0 };
  const wf = workflow(name)
    .step("charge", () => {
      calls.charge++;
      return { chargeId: `ch_${calls.charge}` };
    })
    .waitFor("confirmed", { timeoutMs })
    .phase("capture", ({ state }) => {
      calls.capture++;
      return { how: state.confirmed };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, calls };
}

it("retryFrom before a timed wait whose deadline passed: the wait runs again with a fresh timeout", async () => {
  const engine = createEngine({ db: t.db });
  const timeoutMs = 400;
  const { wf, calls } = confirmation("rearm_timeout", timeoutMs);
  expect((await engine.runOnce(wf, { tenantId: T, key: "ra", input: {} })).status).toBe(202);
  const first = (await engine.inspect(T, "ra"))?.wakeAt?.getTime() as number;
  // The deadline passes on the database clock; no one has resumed the run yet.
  await waitFor(async () => ((await dbNow()) > first ? true : undefined), 30_000);

  await engine.retryFrom(T, "ra", "charge");
  const before = await dbNow();
  expect(await engine.runOnce(wf, { tenantId: T, key: "ra", input: {} })).toMatchObject({
    status: 202,
    outcome: "suspended",
  });
  const rec = await engine.inspect(T, "ra");
  expect(rec?.status).toBe("suspended");
  expect(rec?.waitingFor).toMatchObject({ kind: "signal", name: "confirmed" });
  expect(rec?.wakeAt?.getTime()).toBeGreaterThanOrEqual(before + timeoutMs);
  expect(calls.charge).toBe(2);

  expect(await engine.signal(T, "ra", "confirmed", "ok")).toEqual({ duplicate: false, woke: true });
  expect(await engine.runOnce(wf, { tenantId: T, key: "ra", input: {} })).toMatchObject({
    status: 201,
    body: { how: "ok" },
  });
});

it("retryFrom before a wait whose signal was delivered: the signal stays delivered and is read again", async () => {
  const engine = createEngine({ db: t.db });
  let fail = true;
  const wf = workflow("reread_signal")
    .phase("prepare", () => ({ prepared: true }))
    .waitFor("confirmed", { timeoutMs: 3_600_000 })
    .phase("capture", ({ state }) => {
      // A value that cannot be stored parks the run, once.
      if (fail) return { when: 1n } as unknown as { how: unknown };
      return { how: state.confirmed };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
  await engine.runOnce(wf, { tenantId: T, key: "rr", input: {} });
  expect(await engine.signal(T, "rr", "confirmed", { by: "provider" })).toMatchObject({ woke: true });
  await expect(engine.runOnce(wf, { tenantId: T, key: "rr", input: {} })).rejects.toThrow();
  expect((await engine.inspect(T, "rr"))?.status).toBe("parked");

  fail = false;
  await engine.retryFrom(T, "rr", "prepare");
  expect(await engine.signal(T, "rr", "confirmed", { by: "provider" })).toEqual({ duplicate: true, woke: false });
  // No new signal: the run reads the one it had and finishes without suspending.
  expect(await engine.runOnce(wf, { tenantId: T, key: "rr", input: {} })).toMatchObject({
    status: 201,
    body: { how: { by: "provider" } },
  });
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = ${T} AND key = 'rr'`.execute(t.db);
  expect(rows[0]?.n).toBe(1);
});

it("a takeover keeps the deadline: a run taken over at its wait suspends there again with the same one", async () => {
  const engine = createEngine({ db: t.db });
  const wf = workflow("keep_deadline")
    .waitFor("confirmed", { timeoutMs: 3_600_000, schema: z.object({ ok: z.boolean() }) })
    .respond(({ state }) => ({ status: 201, body: state }));
  await engine.runOnce(wf, { tenantId: T, key: "kd", input: {} });
  const deadline = (await engine.inspect(T, "kd"))?.wakeAt?.getTime();
  expect(deadline).toBeTypeOf("number");

  // A payload stored unchecked (through SQL) wakes the run; the wait will discard it.
  await sql`
    INSERT INTO idempo.signals (tenant_id, key, run_id, name, payload, fingerprint)
    SELECT tenant_id, key, run_id, 'confirmed', 'null'::json, ${requestFingerprint("signal:confirmed", null)}
    FROM idempo.runs WHERE tenant_id = ${T} AND key = 'kd'`.execute(t.db);
  await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() WHERE tenant_id = ${T} AND key = 'kd'`.execute(t.db);

  // The first resumer crashes at the wait; its lease runs out; the next one takes the run over.
  const crash = crashAt(engine, "locked:wait:confirmed");
  await expect(engine.runOnce(wf, { tenantId: T, key: "kd", input: {} })).rejects.toThrow(/injected crash/);
  crash.clear();
  expect((await engine.inspect(T, "kd"))?.status).toBe("in_flight");
  await sql`UPDATE idempo.runs SET locked_until = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${T} AND key = 'kd'`.execute(t.db);
  expect(await engine.runOnce(wf, { tenantId: T, key: "kd", input: {} })).toMatchObject({ status: 202 });
  const rec = await engine.inspect(T, "kd");
  expect(rec?.status).toBe("suspended");
  expect(rec?.wakeAt?.getTime()).toBe(deadline);
  expect(await engine.signal(T, "kd", "confirmed", { ok: true })).toMatchObject({ woke: true });
  expect(await engine.runOnce(wf, { tenantId: T, key: "kd", input: {} })).toMatchObject({
    status: 201,
    body: { confirmed: { ok: true } },
  });
});
