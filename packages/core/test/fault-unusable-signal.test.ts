/**
 * Fault: a signal was acknowledged and then could never be used. A process
 * that did not know the run's workflow (created without `workflows`) stored
 * a payload that failed the wait's schema and answered `woke: true`; the run
 * then parked on it ("returned a value that cannot be stored as JSON"), the
 * provider's corrected signal got 422 because the bad one was stored, and
 * `unpark` and `retryFrom` parked the run again on the same signal. A
 * process that knew only v2 of a workflow refused a valid signal for a v1
 * run with v2's schema.
 *
 * Now a signal is checked against the wait's schema in the run's own
 * version before it is stored, and a process that lacks that version
 * stores nothing and raises `RunStateError` naming it. A stored signal that
 * fails the schema (stored unchecked: through SQL, or by an older version)
 * never parks the run: the run discards it, records that in its history,
 * keeps waiting, and takes the next signal of that name as a first delivery.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, InputValidationError, RunStateError, workflow } from "../src/index.ts";
import { requestFingerprint } from "../src/json/fingerprint.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const T = "acme";

const Outcome = z.object({ outcome: z.enum(["succeeded", "failed"]) });

function threeDs(name: string) {
  const calls = { capture: 0 };
  const wf = workflow(name)
    .phase("authorise", () => ({ authorised: true }))
    .waitFor("three_ds", { schema: Outcome, timeoutMs: 3_600_000 })
    .phase("capture", ({ state }) => {
      calls.capture++;
      return { captured: state.three_ds.outcome };
    })
    .respond(({ state }) => ({ status: 200, body: { captured: state.captured } }));
  return { wf, calls };
}

async function signalRows(key: string): Promise<{ name: string; payload: unknown }[]> {
  const { rows } = await sql<{ name: string; payload: unknown }>`
    SELECT name, payload FROM idempo.signals WHERE tenant_id = ${T} AND key = ${key} ORDER BY name`.execute(t.db);
  return rows;
}

/**
 * Store a signal as a client of the table would (another language, or an
 * older version that checked nothing): no schema check. `wake` also makes a
 * run suspended on the wait due, as `engine.signal` does.
 */
async function storeUnchecked(key: string, name: string, payload: unknown, wake: boolean): Promise<void> {
  const json = JSON.stringify(payload);
  await sql`
    INSERT INTO idempo.signals (tenant_id, key, run_id, name, payload, fingerprint)
    SELECT tenant_id, key, run_id, ${name}, ${json}::json, ${requestFingerprint(`signal:${name}`, payload as never)}
    FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
  if (wake) {
    await sql`UPDATE idempo.runs SET wake_at = clock_timestamp()
              WHERE tenant_id = ${T} AND key = ${key} AND status = 'suspended'`.execute(t.db);
  }
}

/**
 * The state an older version left a run in when the signal woke it and it
 * parked on the stored payload that fails the schema: woken (due now), then
 * parked with the wait it was in.
 */
async function parkAsOlderVersionDid(key: string): Promise<void> {
  await sql`UPDATE idempo.runs
            SET status = 'parked', parked_reason = 'waitFor ''three_ds'' returned a value that cannot be stored as JSON',
                parked_at = clock_timestamp(), owner_token = NULL, locked_until = NULL, wake_at = clock_timestamp()
            WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
}

function discarded(history: readonly { kind: string; name: string; outcome: string }[] | undefined) {
  return (history ?? []).filter((h) => h.outcome === "discarded").map((h) => `${h.kind}:${h.name}`);
}

describe("a process that cannot know the schema stores nothing", () => {
  it("created without workflows: RunStateError names the workflow and version, for a bad payload and a good one", async () => {
    const { wf, calls } = threeDs("tds_no_workflows");
    const app = createEngine({ db: t.db });
    expect((await app.runOnce(wf, { tenantId: T, key: "nw", input: {} })).status).toBe(202);

    const webhooks = createEngine({ db: t.db });
    const bad = await webhooks.signal(T, "nw", "three_ds", { outcome: "maybe" }).catch((e) => e);
    expect(bad).toBeInstanceOf(RunStateError);
    expect(bad.message).toContain("'tds_no_workflows'");
    expect(bad.message).toContain("version 1");
    const good = await webhooks.signal(T, "nw", "three_ds", { outcome: "succeeded" }).catch((e) => e);
    expect(good).toBeInstanceOf(RunStateError);
    expect(await signalRows("nw")).toEqual([]);
    expect((await app.inspect(T, "nw"))?.status).toBe("suspended");

    // The process that knows the workflow refuses the bad one and keeps the good one.
    await expect(app.signal(T, "nw", "three_ds", { outcome: "maybe" })).rejects.toBeInstanceOf(InputValidationError);
    expect(await app.signal(T, "nw", "three_ds", { outcome: "succeeded" })).toEqual({ duplicate: false, woke: true });
    // A repeat of what was delivered is acknowledged by either: it stores nothing.
    expect(await webhooks.signal(T, "nw", "three_ds", { outcome: "succeeded" })).toEqual({
      duplicate: true,
      woke: false,
    });
    expect(await app.runOnce(wf, { tenantId: T, key: "nw", input: {} })).toMatchObject({
      status: 200,
      body: { captured: "succeeded" },
    });
    expect(calls.capture).toBe(1);
  });

  it("a process that knows only v2 (no .replaces) refuses every signal for a v1 run, naming version 1", async () => {
    const v1 = workflow("tds_v2_only")
      .waitFor("three_ds", { schema: Outcome })
      .respond(({ state }) => ({ status: 200, body: { v: 1, outcome: state.three_ds.outcome } }));
    const v2 = workflow("tds_v2_only")
      .version(2)
      .waitFor("three_ds", { schema: z.object({ status: z.enum(["ok", "ko"]) }) })
      .respond(({ state }) => ({ status: 200, body: { v: 2, outcome: state.three_ds.status } }));
    const old = createEngine({ db: t.db, workflows: [v1] });
    expect((await old.runOnce(v1, { tenantId: T, key: "v1run", input: {} })).status).toBe(202);

    const v2Only = createEngine({ db: t.db, workflows: [v2] });
    for (const payload of [{ outcome: "succeeded" }, { status: "ok" }]) {
      const refused = await v2Only.signal(T, "v1run", "three_ds", payload).catch((e) => e);
      expect(refused).toBeInstanceOf(RunStateError);
      expect(refused.message).toContain("'tds_v2_only' version 1");
    }
    expect(await signalRows("v1run")).toEqual([]);

    // The process that has v1 takes the signal; the run finishes on v1.
    expect(await old.signal(T, "v1run", "three_ds", { outcome: "succeeded" })).toMatchObject({ woke: true });
    expect(await old.runOnce(v1, { tenantId: T, key: "v1run", input: {} })).toMatchObject({
      status: 200,
      body: { v: 1, outcome: "succeeded" },
    });
  });
});

describe("a stored signal that fails the schema never parks the run", () => {
  it("stored unchecked while the run waits: a corrected signal replaces it at once, not 422", async () => {
    const { wf, calls } = threeDs("tds_sql_then_corrected");
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: T, key: "sc", input: {} });
    await storeUnchecked("sc", "three_ds", { outcome: "maybe" }, false);

    expect(await engine.signal(T, "sc", "three_ds", { outcome: "succeeded" })).toEqual({
      duplicate: false,
      woke: true,
    });
    expect(await signalRows("sc")).toEqual([{ name: "three_ds", payload: { outcome: "succeeded" } }]);
    expect(await engine.runOnce(wf, { tenantId: T, key: "sc", input: {} })).toMatchObject({
      status: 200,
      body: { captured: "succeeded" },
    });
    expect(calls.capture).toBe(1);
    const rec = await engine.inspect(T, "sc");
    expect(discarded(rec?.history)).toEqual(["wait:three_ds"]);
    expect(rec?.history?.find((h) => h.outcome === "discarded")?.error).toContain("outcome");
  });

  it("stored unchecked and woken: the run discards it, records it, keeps waiting, and takes the next one", async () => {
    const { wf, calls } = threeDs("tds_sql_woken");
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: T, key: "sw", input: {} });
    const deadline = (await engine.inspect(T, "sw"))?.wakeAt;
    await storeUnchecked("sw", "three_ds", { outcome: "maybe" }, true);

    expect(await engine.runOnce(wf, { tenantId: T, key: "sw", input: {} })).toMatchObject({
      status: 202,
      outcome: "suspended",
    });
    const rec = await engine.inspect(T, "sw");
    expect(rec?.status).toBe("suspended");
    expect(rec?.waitingFor).toMatchObject({ kind: "signal", name: "three_ds" });
    // Discarding is no timeout: the wait keeps the deadline it had.
    expect(rec?.wakeAt?.getTime()).toBe(deadline?.getTime());
    expect(discarded(rec?.history)).toEqual(["wait:three_ds"]);
    const entry = rec?.history?.find((h) => h.outcome === "discarded");
    expect(entry?.error).toMatch(/three_ds/);
    expect(entry?.error).toMatch(/outcome/);
    expect(await signalRows("sw")).toEqual([]);

    expect(await engine.signal(T, "sw", "three_ds", { outcome: "failed" })).toEqual({ duplicate: false, woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "sw", input: {} })).toMatchObject({
      status: 200,
      body: { captured: "failed" },
    });
    expect(calls.capture).toBe(1);
  });

  it("stored unchecked before the run reached the wait: the run discards it there and suspends", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const wf = workflow("tds_sql_early")
      .phase("authorise", async () => {
        await gate;
        return { authorised: true };
      })
      .waitFor("three_ds", { schema: Outcome })
      .respond(({ state }) => ({ status: 200, body: state.three_ds }));
    const engine = createEngine({ db: t.db });
    const running = engine.runOnce(wf, { tenantId: T, key: "se", input: {} });
    await expect.poll(async () => (await engine.inspect(T, "se"))?.status, { timeout: 30_000 }).toBe("in_flight");
    await storeUnchecked("se", "three_ds", { outcome: 7 }, false);
    release();
    expect(await running).toMatchObject({ status: 202, outcome: "suspended" });
    expect(discarded((await engine.inspect(T, "se"))?.history)).toEqual(["wait:three_ds"]);
    expect(await engine.signal(T, "se", "three_ds", { outcome: "succeeded" })).toMatchObject({ woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "se", input: {} })).toMatchObject({
      status: 200,
      body: { outcome: "succeeded" },
    });
  });

  it("unpark of a run an older version parked on such a signal: it waits again and takes the corrected one", async () => {
    const { wf } = threeDs("tds_unpark");
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: T, key: "up", input: {} });
    await storeUnchecked("up", "three_ds", { outcome: "maybe" }, false);
    await parkAsOlderVersionDid("up");

    await engine.unpark(T, "up");
    expect(await engine.runOnce(wf, { tenantId: T, key: "up", input: {} })).toMatchObject({ status: 202 });
    expect((await engine.inspect(T, "up"))?.status).toBe("suspended");
    expect(await engine.signal(T, "up", "three_ds", { outcome: "succeeded" })).toEqual({
      duplicate: false,
      woke: true,
    });
    expect(await engine.runOnce(wf, { tenantId: T, key: "up", input: {} })).toMatchObject({
      status: 200,
      body: { captured: "succeeded" },
    });
  });

  it("retryFrom the first item of such a parked run: it runs again, waits, and takes the corrected one", async () => {
    const { wf } = threeDs("tds_retry_from");
    const engine = createEngine({ db: t.db });
    await engine.runOnce(wf, { tenantId: T, key: "rf", input: {} });
    await storeUnchecked("rf", "three_ds", { outcome: "maybe" }, false);
    await parkAsOlderVersionDid("rf");

    await engine.retryFrom(T, "rf", "authorise");
    expect(await engine.runOnce(wf, { tenantId: T, key: "rf", input: {} })).toMatchObject({ status: 202 });
    const rec = await engine.inspect(T, "rf");
    expect(rec?.status).toBe("suspended");
    expect(discarded(rec?.history)).toEqual(["wait:three_ds"]);
    expect(await engine.signal(T, "rf", "three_ds", { outcome: "succeeded" })).toMatchObject({ woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "rf", input: {} })).toMatchObject({
      status: 200,
      body: { captured: "succeeded" },
    });
  });
});
