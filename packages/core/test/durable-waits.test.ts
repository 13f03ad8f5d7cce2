/**
 * Durable sleeps and waits for signals: the suspension is one committed row
 * (no owner, lease or timer), runOnce answers 202 and then 409 with the time
 * to the wake-up, and a due run resumes after its item, in a new engine too.
 * Wake-up times are moved in the database instead of waiting for them.
 */
import { sql } from "kysely";
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import {
  createEngine,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  RunNotFoundError,
  RunStateError,
  workflow,
} from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 8 });
const T = "acme";

/** Make the key's wake-up time pass now, as if the sleep or timeout had run out. */
async function makeDue(key: string): Promise<void> {
  await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
}

async function rowCounts(key: string) {
  const { rows } = await sql<{ runs: number; history: number; signals: number }>`
    SELECT (SELECT count(*)::int FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}) AS runs,
           (SELECT count(*)::int FROM idempo.run_history WHERE tenant_id = ${T} AND key = ${key}) AS history,
           (SELECT count(*)::int FROM idempo.signals WHERE tenant_id = ${T} AND key = ${key}) AS signals`.execute(t.db);
  return rows[0];
}

function sleeper(name: string, ms: number, calls = { before: 0, after: 0 }) {
  const wf = workflow(name)
    .input(z.object({ order: z.string() }))
    .phase("authorise", ({ input }) => {
      calls.before++;
      return { authorised: input.order };
    })
    .sleep("grace", ms)
    .phase("capture", ({ state }) => {
      calls.after++;
      return { captured: state.authorised };
    })
    .accepted(({ state }) => ({ pending: true, authorised: state.authorised ?? null }))
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, calls };
}

describe(".sleep", () => {
  it("suspends with 202 and the accepted body, answers 409 with the time to wake-up, then resumes after the item", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, calls } = sleeper("sleep_basic", 600_000);
    const first = await engine.runOnce(wf, { tenantId: T, key: "s1", input: { order: "o1" } });
    expect(first).toEqual({
      status: 202,
      body: { pending: true, authorised: "o1" },
      replayed: false,
      outcome: "suspended",
    });

    const rec = await engine.inspect(T, "s1");
    expect(rec?.status).toBe("suspended");
    expect(rec?.ownerToken).toBeNull();
    expect(rec?.leaseRemainingMs).toBeNull();
    expect(rec?.recoveryPoint).toBe("grace");
    expect(rec?.waitingFor?.kind).toBe("sleep");
    expect(rec?.waitingFor?.name).toBe("grace");
    expect(rec?.waitingFor?.until).toBeInstanceOf(Date);
    expect(rec?.history?.map((h) => `${h.kind}:${h.name}:${h.outcome}`)).toEqual([
      "phase:authorise:succeeded",
      "sleep:grace:started",
    ]);

    const busy = await engine.runOnce(wf, { tenantId: T, key: "s1", input: { order: "o1" } }).catch((e) => e);
    expect(busy).toBeInstanceOf(IdempotencyKeyInProgressError);
    // Points at the wake-up time (ten minutes away), not at the 30 s lease.
    expect(busy.retryAfterMs).toBeGreaterThan(30_000);
    expect(busy.retryAfterMs).toBeLessThanOrEqual(600_000);
    const other = await engine.runOnce(wf, { tenantId: T, key: "s1", input: { order: "o2" } }).catch((e) => e);
    expect(other).toBeInstanceOf(IdempotencyKeyMismatchError);

    await makeDue("s1");
    const done = await engine.runOnce(wf, { tenantId: T, key: "s1", input: { order: "o1" } });
    expect(done).toEqual({
      status: 201,
      body: { authorised: "o1", captured: "o1" },
      replayed: false,
      outcome: "succeeded",
    });
    expect(calls).toEqual({ before: 1, after: 1 });
    const after = await engine.inspect(T, "s1");
    // Resuming a clean suspension is not a new attempt.
    expect(after?.attempt).toBe(1);
    expect(after?.waitingFor).toBeNull();
    expect(after?.history?.map((h) => `${h.kind}:${h.name}:${h.outcome}`)).toEqual([
      "phase:authorise:succeeded",
      "sleep:grace:succeeded",
      "phase:capture:succeeded",
    ]);
    const replay = await engine.runOnce(wf, { tenantId: T, key: "s1", input: { order: "o1" } });
    expect(replay).toMatchObject({ status: 201, replayed: true, outcome: "succeeded" });
  });

  it("a seven-day sleep is one row and leaves no timer behind; a new engine resumes it", async () => {
    const { wf, calls } = sleeper("sleep_week", 7 * 24 * 60 * 60 * 1000);
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timers();
    const first = createEngine({ db: t.db });
    expect((await first.runOnce(wf, { tenantId: T, key: "week", input: { order: "w" } })).status).toBe(202);
    expect(timers()).toBeLessThanOrEqual(before);
    expect(await rowCounts("week")).toEqual({ runs: 1, history: 2, signals: 0 });
    const rec = await first.inspect(T, "week");
    const untilMs = (rec?.waitingFor?.until?.getTime() ?? 0) - (rec?.updatedAt?.getTime() ?? 0);
    expect(untilMs).toBeGreaterThan(7 * 24 * 60 * 60 * 1000 - 60_000);
    expect(rec?.wakeAt?.getTime()).toBe(rec?.waitingFor?.until?.getTime());
    expect((await first.listKeys({ status: "suspended", tenantId: T })).items.map((r) => r.key)).toContain("week");

    // "Restart": another engine, on another pool, with nothing in memory.
    await makeDue("week");
    const second = createEngine({ db: t.connect(2) });
    const done = await second.runOnce(wf, { tenantId: T, key: "week", input: { order: "w" } });
    expect(done).toMatchObject({ status: 201, body: { captured: "w" } });
    expect(calls).toEqual({ before: 1, after: 1 });
  });

  it("a computed duration gets the run info; a bad one parks the run", async () => {
    const seen: unknown[] = [];
    const wf = workflow("sleep_fn")
      .phase("a", () => ({ n: 5 }))
      .sleep("nap", (info) => {
        seen.push({ state: info.state, key: info.key, tenantId: info.tenantId, attempt: info.attempt });
        return info.state.n * 1000;
      })
      .respond(() => ({ status: 200, body: null }));
    const engine = createEngine({ db: t.db });
    expect((await engine.runOnce(wf, { tenantId: T, key: "fn", input: {} })).status).toBe(202);
    expect(seen).toEqual([{ state: { n: 5 }, key: "fn", tenantId: T, attempt: 1 }]);

    const bad = workflow("sleep_bad")
      .sleep("nap", () => Number.NaN)
      .respond(() => ({ status: 200, body: null }));
    await expect(engine.runOnce(bad, { tenantId: T, key: "bad", input: {} })).rejects.toMatchObject({
      code: "unstorable_value",
    });
    expect((await engine.inspect(T, "bad"))?.status).toBe("parked");
  });

  it("refuses a fixed duration out of range when the workflow is built", () => {
    expect(() => workflow("w").sleep("x", -1)).toThrow(/ms must be an integer/);
    expect(() => workflow("w").sleep("x", 1.5)).toThrow(/ms must be an integer/);
    expect(() =>
      workflow("w")
        .phase("x", () => ({}))
        .sleep("x", 1),
    ).toThrow(/already has a phase named 'x'/);
  });
});

function confirmation(name: string, options: Parameters<ReturnType<typeof workflow>["waitFor"]>[1] = {}) {
  const calls = { charge: 0, capture: 0 };
  const wf = workflow(name)
    .step("charge", () => {
      calls.charge++;
      return { chargeId: "ch_1" };
    })
    .waitFor("confirmed", options)
    .phase("capture", ({ state }) => {
      calls.capture++;
      return { captured: state.chargeId, how: state.confirmed };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, calls };
}

describe(".waitFor and engine.signal", () => {
  it("suspends until the signal; the payload is merged under the name; a duplicate is a no-op, also after completion", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, calls } = confirmation("wait_basic");
    expect(await engine.runOnce(wf, { tenantId: T, key: "w1", input: {} })).toMatchObject({
      status: 202,
      body: null,
      outcome: "suspended",
    });
    const rec = await engine.inspect(T, "w1");
    expect(rec?.waitingFor).toEqual({ kind: "signal", name: "confirmed" });
    expect(rec?.wakeAt).toBeNull();
    const busy = await engine.runOnce(wf, { tenantId: T, key: "w1", input: {} }).catch((e) => e);
    expect(busy).toBeInstanceOf(IdempotencyKeyInProgressError);
    // No wake-up time known: the workflow's lease length.
    expect(busy.retryAfterMs).toBe(30_000);

    expect(await engine.signal(T, "w1", "confirmed", { ok: true, b: 1, a: 2 })).toEqual({
      duplicate: false,
      woke: true,
    });
    // Same canonical payload (other key order) again: a no-op.
    expect(await engine.signal(T, "w1", "confirmed", { a: 2, ok: true, b: 1.0 })).toEqual({
      duplicate: true,
      woke: false,
    });
    await expect(engine.signal(T, "w1", "confirmed", { ok: false })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );
    const done = await engine.runOnce(wf, { tenantId: T, key: "w1", input: {} });
    expect(done).toMatchObject({ status: 201, body: { captured: "ch_1", how: { ok: true, b: 1, a: 2 } } });
    expect(calls).toEqual({ charge: 1, capture: 1 });
    expect((await engine.inspect(T, "w1"))?.attempt).toBe(1);

    expect(await engine.signal(T, "w1", "confirmed", { ok: true, a: 2, b: 1 })).toEqual({
      duplicate: true,
      woke: false,
    });
    await expect(engine.signal(T, "w1", "confirmed", { ok: "late" })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );
    expect((await rowCounts("w1"))?.signals).toBe(1);
  });

  it("keeps a signal that arrives before the run reaches the wait, and uses it without suspending", async () => {
    const engine = createEngine({ db: t.db });
    const gate = { open: () => {} };
    const wf = workflow("wait_early")
      .step(
        "charge",
        () =>
          new Promise<{ chargeId: string }>((r) => {
            gate.open = () => r({ chargeId: "ch_e" });
          }),
      )
      .waitFor("confirmed")
      .respond(({ state }) => ({ status: 201, body: state }));
    const running = engine.runOnce(wf, { tenantId: T, key: "early", input: {} });
    await expect.poll(async () => (await engine.inspect(T, "early"))?.history?.length, { timeout: 30_000 }).toBe(1);
    expect(await engine.signal(T, "early", "confirmed", "yes")).toEqual({ duplicate: false, woke: false });
    gate.open();
    expect(await running).toMatchObject({ status: 201, body: { chargeId: "ch_e", confirmed: "yes" } });
    const rec = await engine.inspect(T, "early");
    expect(rec?.history?.map((h) => `${h.kind}:${h.name}:${h.outcome}`)).toEqual([
      "step:charge:succeeded",
      "wait:confirmed:succeeded",
    ]);
  });

  it("typed errors: absent key, unknown name, not JSON, a new signal for a completed run, the wait's schema", async () => {
    const engine = createEngine({ db: t.db });
    await expect(engine.signal(T, "nobody", "confirmed", {})).rejects.toBeInstanceOf(RunNotFoundError);
    const { wf } = confirmation("wait_errors", { schema: z.object({ ok: z.boolean() }) });
    await engine.runOnce(wf, { tenantId: T, key: "e1", input: {} });
    const unknown = await engine.signal(T, "e1", "shipped", {}).catch((e) => e);
    expect(unknown).toBeInstanceOf(InputValidationError);
    expect(unknown.message).toContain("waits for: confirmed");
    await expect(engine.signal(T, "e1", "confirmed", { n: 1n })).rejects.toBeInstanceOf(InputValidationError);
    // This engine ran the workflow, so it knows the wait's schema.
    const refused = await engine.signal(T, "e1", "confirmed", { ok: "yes" }).catch((e) => e);
    expect(refused).toBeInstanceOf(InputValidationError);
    expect(refused.issues[0].path).toBe("payload.ok");
    expect((await rowCounts("e1"))?.signals).toBe(0);

    const plain = workflow("wait_plain")
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(plain, { tenantId: T, key: "e2", input: {} });
    await expect(engine.signal(T, "e2", "confirmed", {})).rejects.toBeInstanceOf(InputValidationError);

    const { wf: other } = confirmation("wait_done");
    await engine.runOnce(other, { tenantId: T, key: "e3", input: {} });
    await engine.cancel(T, "e3");
    const late = await engine.signal(T, "e3", "confirmed", { ok: true }).catch((e) => e);
    expect(late).toBeInstanceOf(RunStateError);
    expect((await rowCounts("e3"))?.signals).toBe(0);
  });

  it("a timed-out wait without onTimeout stores a 408 with problem code wait_timeout", async () => {
    const engine = createEngine({ db: t.db });
    const { wf, calls } = confirmation("wait_408", { timeoutMs: 3_600_000 });
    await engine.runOnce(wf, { tenantId: T, key: "to1", input: {} });
    const rec = await engine.inspect(T, "to1");
    expect(rec?.waitingFor?.until).toBeInstanceOf(Date);
    await makeDue("to1");
    const res = await engine.runOnce(wf, { tenantId: T, key: "to1", input: {} });
    expect(res).toMatchObject({ status: 408, outcome: "failed", body: { code: "wait_timeout", status: 408 } });
    expect(calls.capture).toBe(0);
    expect((await engine.runOnce(wf, { tenantId: T, key: "to1", input: {} })).replayed).toBe(true);
  });

  it("onTimeout may return a value merged under the name, or call ctx.fail", async () => {
    const engine = createEngine({ db: t.db });
    const { wf } = confirmation("wait_fallback", { timeoutMs: 3_600_000, onTimeout: () => ({ by: "timeout" }) });
    await engine.runOnce(wf, { tenantId: T, key: "to2", input: {} });
    await makeDue("to2");
    expect(await engine.runOnce(wf, { tenantId: T, key: "to2", input: {} })).toMatchObject({
      status: 201,
      body: { how: { by: "timeout" } },
    });

    const voided = workflow("wait_void")
      .step("charge", () => ({ chargeId: "ch_v" }))
      .waitFor("confirmed", {
        timeoutMs: 3_600_000,
        onTimeout: (ctx) => ctx.fail(402, { voided: ctx.state.chargeId }),
      })
      .respond(() => ({ status: 201, body: null }));
    await engine.runOnce(voided, { tenantId: T, key: "to3", input: {} });
    await makeDue("to3");
    expect(await engine.runOnce(voided, { tenantId: T, key: "to3", input: {} })).toMatchObject({
      status: 402,
      outcome: "failed",
      body: { voided: "ch_v" },
    });
  });

  it("a signal that lands after the timeout passed but before the run resumed wins over the timeout", async () => {
    const engine = createEngine({ db: t.db });
    const { wf } = confirmation("wait_late_signal", { timeoutMs: 3_600_000 });
    await engine.runOnce(wf, { tenantId: T, key: "to4", input: {} });
    await makeDue("to4");
    expect(await engine.signal(T, "to4", "confirmed", "ok")).toEqual({ duplicate: false, woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "to4", input: {} })).toMatchObject({
      status: 201,
      body: { how: "ok" },
    });
  });

  it("retryFrom before a timed wait re-arms it: reaching it again starts a fresh timeout", async () => {
    // A takeover keeps the deadline instead: see retry-from-wait-deadlines.test.ts.
    const engine = createEngine({ db: t.db });
    const { wf } = confirmation("wait_deadline", { timeoutMs: 3_600_000 });
    await engine.runOnce(wf, { tenantId: T, key: "dl", input: {} });
    await engine.retryFrom(T, "dl", "charge");
    const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
    const before = (rows[0] as { now: Date }).now.getTime();
    await engine.runOnce(wf, { tenantId: T, key: "dl", input: {} });
    expect((await engine.inspect(T, "dl"))?.wakeAt?.getTime()).toBeGreaterThanOrEqual(before + 3_600_000);
  });
});

describe("types", () => {
  // Checked by the type checker (pnpm typecheck), which fails on a mismatch.
  it("state after a wait holds the schema's output (or JsonValue), and onTimeout's value", () => {
    workflow("types")
      .waitFor("confirmed", { schema: z.object({ ok: z.boolean() }) })
      .waitFor("shipped", { timeoutMs: 1, onTimeout: () => ({ late: true as const }) })
      .phase("check", ({ state }) => {
        expectTypeOf(state.confirmed).toEqualTypeOf<{ ok: boolean }>();
        expectTypeOf(state.shipped).toEqualTypeOf<import("../src/index.ts").JsonValue | { late: true }>();
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
  });
});
