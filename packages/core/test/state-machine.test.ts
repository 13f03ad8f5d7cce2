/**
 * Every row of the SPEC's claim state machine, against real Postgres, with
 * effects counted (orders rows, provider calls, history) and refused calls
 * checked to leave the record exactly as it was.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  createEngine,
  deriveStepKey,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { countHistory, countOrders, countRuns, historyOf, recordSnapshot } from "./support/effects.ts";
import { crashAt, waitFor, waitForLeaseExpiry } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const T = "acme";
const LEASE = 30_000;

function setup(engineOptions: { leaseMs?: number; heartbeatMs?: number } = {}) {
  const payments = new FakePayments();
  const { workflow: checkout, counters } = makeCheckout(payments);
  const engine = createEngine({ db: t.db, leaseMs: LEASE, ...engineOptions });
  return { payments, checkout, counters, engine };
}

/** Leave `key` in flight at recovery point `charge` (crash after the step was recorded). */
async function inFlightAfterCharge(
  s: ReturnType<typeof setup>,
  key: string,
  input: { cartId: string; amountCents: number },
) {
  crashAt(s.engine, "after:step:charge", { key });
  await expect(s.engine.runOnce(s.checkout, { tenantId: T, key, input })).rejects.toBeInstanceOf(CrashSignal);
  setFaultHook(s.engine, undefined);
  const before = await recordSnapshot(s.engine, T, key);
  expect(before).toMatchObject({ status: "in_flight", recoveryPoint: "charge", attempt: 1 });
  return before;
}

describe("absent key", () => {
  it("claims and executes the workflow once", async () => {
    const s = setup();
    const res = await s.engine.runOnce(s.checkout, {
      tenantId: T,
      key: "absent-1",
      input: { cartId: "c-abs", amountCents: 500 },
    });
    expect(res).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
    expect(await countOrders(t.db, { cartId: "c-abs" })).toBe(1);
    expect(s.payments.calls).toEqual([
      expect.objectContaining({ key: deriveStepKey(T, "absent-1", "checkout", "charge") }),
    ]);
    expect(s.payments.charges).toBe(1);
    const rec = await s.engine.inspect(T, "absent-1");
    expect(rec).toMatchObject({ status: "completed", attempt: 1, recoveryPoint: "record_charge", ownerToken: null });
    expect(rec?.response).toEqual({ status: 201, body: res.body, outcome: "succeeded" });
    expect(await historyOf(s.engine, T, "absent-1")).toEqual([
      "create_order:1:succeeded",
      "charge:1:succeeded",
      "record_charge:1:succeeded",
    ]);
  });
});

describe("in flight, lease valid", () => {
  it("same payload: 409 key_in_progress with retryAfterMs within the lease, record unchanged", async () => {
    const s = setup();
    const input = { cartId: "c-409", amountCents: 500 };
    const before = await inFlightAfterCharge(s, "busy-1", input);
    const error = await s.engine.runOnce(s.checkout, { tenantId: T, key: "busy-1", input }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyKeyInProgressError);
    const e = error as IdempotencyKeyInProgressError;
    expect([e.code, e.httpStatus]).toEqual(["key_in_progress", 409]);
    expect(e.retryAfterMs).toBeGreaterThan(0);
    expect(e.retryAfterMs).toBeLessThanOrEqual(LEASE);
    expect(await recordSnapshot(s.engine, T, "busy-1")).toEqual(before);
    expect(s.counters).toEqual({ create_order: 1, charge: 1, record_charge: 0 });
  });

  it("different payload or workflow: 422 key_mismatch, record unchanged", async () => {
    const s = setup();
    const before = await inFlightAfterCharge(s, "busy-2", { cartId: "c-422", amountCents: 500 });
    const other = makeCheckout(s.payments, { name: "checkout_v2" }).workflow;
    for (const call of [
      () => s.engine.runOnce(s.checkout, { tenantId: T, key: "busy-2", input: { cartId: "c-422", amountCents: 501 } }),
      () => s.engine.runOnce(other, { tenantId: T, key: "busy-2", input: { cartId: "c-422", amountCents: 500 } }),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(IdempotencyKeyMismatchError);
      expect(error).toMatchObject({ code: "key_mismatch", httpStatus: 422 });
    }
    expect(await recordSnapshot(s.engine, T, "busy-2")).toEqual(before);
    expect(await countOrders(t.db, { cartId: "c-422" })).toBe(1);
  });
});

describe("in flight, lease expired", () => {
  it("same payload: takeover with a new owner token, attempt 2, resumes after the recovery point", async () => {
    const s = setup();
    const input = { cartId: "c-take", amountCents: 700 };
    const before = await inFlightAfterCharge(s, "take-1", input);
    expect(await s.engine.release(T, "take-1")).toMatchObject({ status: "in_flight", ownerToken: null });
    const seen: { ownerToken: string | null; attempt: number }[] = [];
    setFaultHook(s.engine, async (point) => {
      if (point !== "before:phase:record_charge") return;
      const rec = await s.engine.inspect(T, "take-1");
      seen.push({ ownerToken: rec?.ownerToken ?? null, attempt: rec?.attempt ?? 0 });
    });
    const res = await s.engine.runOnce(s.checkout, { tenantId: T, key: "take-1", input });
    expect(res).toMatchObject({ status: 201, replayed: false, outcome: "succeeded" });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.attempt).toBe(2);
    expect(seen[0]?.ownerToken).toEqual(expect.any(String));
    expect(seen[0]?.ownerToken).not.toBe(before?.ownerToken);
    // Resumed after `charge`: neither create_order nor the provider ran again.
    expect(s.counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(s.payments.calls).toHaveLength(1);
    expect(await countOrders(t.db, { cartId: "c-take" })).toBe(1);
    expect(await historyOf(s.engine, T, "take-1")).toEqual([
      "create_order:1:succeeded",
      "charge:1:succeeded",
      "record_charge:2:succeeded",
    ]);
    expect(await recordSnapshot(s.engine, T, "take-1")).toMatchObject({
      status: "completed",
      attempt: 2,
      runId: before?.runId,
    });
  });

  it("lease lapsed by the database clock (no release): 409 first, takeover once it has run out", async () => {
    const s = setup({ leaseMs: 1000 });
    const input = { cartId: "c-lapse", amountCents: 700 };
    crashAt(s.engine, "before:phase:record_charge", { key: "lapse-1" });
    await expect(s.engine.runOnce(s.checkout, { tenantId: T, key: "lapse-1", input })).rejects.toBeInstanceOf(
      CrashSignal,
    );
    const early = await s.engine.runOnce(s.checkout, { tenantId: T, key: "lapse-1", input }).catch((e: unknown) => e);
    expect(early).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect((early as IdempotencyKeyInProgressError).retryAfterMs).toBeLessThanOrEqual(1000);
    await waitForLeaseExpiry(s.engine, T, "lapse-1");
    const res = await s.engine.runOnce(s.checkout, { tenantId: T, key: "lapse-1", input });
    expect(res.status).toBe(201);
    expect(s.counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect((await s.engine.inspect(T, "lapse-1"))?.attempt).toBe(2);
  });

  it("different payload: 422 and no takeover; the record keeps its owner, attempt and recovery point", async () => {
    const s = setup();
    const input = { cartId: "c-exp422", amountCents: 700 };
    await inFlightAfterCharge(s, "take-2", input);
    await s.engine.release(T, "take-2");
    const before = await recordSnapshot(s.engine, T, "take-2");
    await expect(
      s.engine.runOnce(s.checkout, { tenantId: T, key: "take-2", input: { ...input, amountCents: 9 } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(await recordSnapshot(s.engine, T, "take-2")).toEqual(before);
    expect(s.counters.record_charge).toBe(0);
    // The owner's own retry can still take over.
    expect((await s.engine.runOnce(s.checkout, { tenantId: T, key: "take-2", input })).status).toBe(201);
  });
});

describe("completed", () => {
  it("same payload: replays the stored response verbatim with replayed: true and no new effects", async () => {
    const s = setup();
    const input = { cartId: "c-replay", amountCents: 900 };
    const first = await s.engine.runOnce(s.checkout, { tenantId: T, key: "done-1", input });
    const before = await recordSnapshot(s.engine, T, "done-1");
    const again = await s.engine.runOnce(s.checkout, {
      tenantId: T,
      key: "done-1",
      input: { amountCents: 900.0, cartId: "c-replay" },
    });
    expect(again).toEqual({ ...first, replayed: true });
    expect(await recordSnapshot(s.engine, T, "done-1")).toEqual(before);
    expect(s.counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(s.payments.calls).toHaveLength(1);
    expect(await countOrders(t.db, { cartId: "c-replay" })).toBe(1);
  });

  it("different payload or different workflow with the same key: 422, record unchanged", async () => {
    const s = setup();
    const input = { cartId: "c-done422", amountCents: 900 };
    await s.engine.runOnce(s.checkout, { tenantId: T, key: "done-2", input });
    const before = await recordSnapshot(s.engine, T, "done-2");
    const renamed = makeCheckout(s.payments, { name: "checkout_express" }).workflow;
    await expect(
      s.engine.runOnce(s.checkout, { tenantId: T, key: "done-2", input: { ...input, cartId: "c-other" } }),
    ).rejects.toMatchObject({ code: "key_mismatch", httpStatus: 422 });
    await expect(s.engine.runOnce(renamed, { tenantId: T, key: "done-2", input })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );
    expect(await recordSnapshot(s.engine, T, "done-2")).toEqual(before);
    expect(s.payments.calls).toHaveLength(1);
  });

  it("past retention and tombstone the key counts as absent and runs again (same or different payload)", async () => {
    let effects = 0;
    // tombstoneMs 0: no tombstone, so the key is absent as soon as retention ends.
    const ticket = workflow("ticket", { retentionMs: 400, tombstoneMs: 0 })
      .input(z.object({ cartId: z.string() }))
      .phase("issue", async ({ tx, tenantId, input }) => {
        effects++;
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_ret_${effects}`}, ${tenantId}, ${input.cartId}, 1)`.execute(
          tx,
        );
        return { n: effects };
      })
      .respond(({ state }) => ({ status: 201, body: { n: state.n } }));
    const engine = createEngine({ db: t.db, leaseMs: LEASE });
    const first = await engine.runOnce(ticket, { tenantId: T, key: "ret-1", input: { cartId: "c-ret" } });
    const oldRun = (await engine.inspect(T, "ret-1"))?.runId;
    await waitFor(async () => ((await engine.inspect(T, "ret-1"))?.expired ? true : undefined));
    const second = await engine.runOnce(ticket, { tenantId: T, key: "ret-1", input: { cartId: "c-ret" } });
    expect([first.body, second.body, second.replayed]).toEqual([{ n: 1 }, { n: 2 }, false]);
    expect(await countOrders(t.db, { cartId: "c-ret" })).toBe(2);
    const rec = await engine.inspect(T, "ret-1");
    expect(rec).toMatchObject({ status: "completed", attempt: 1 });
    expect(rec?.runId).not.toBe(oldRun);
    expect(await countHistory(t.db, T, "ret-1")).toBe(1);
    // A different payload after retention is not a mismatch: the old intent is forgotten.
    await waitFor(async () => ((await engine.inspect(T, "ret-1"))?.expired ? true : undefined));
    const third = await engine.runOnce(ticket, { tenantId: T, key: "ret-1", input: { cartId: "c-ret-b" } });
    expect(third).toMatchObject({ status: 201, replayed: false, body: { n: 3 } });
    expect(await countOrders(t.db, { cartId: "c-ret-b" })).toBe(1);
  });
});

describe("input and key validation before the claim", () => {
  it("zod failure: InputValidationError (400) naming the path, no row, no effect", async () => {
    const s = setup();
    const error = await s.engine
      .runOnce(s.checkout, { tenantId: "val", key: "v-1", input: { cartId: "c-val", amountCents: -5 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputValidationError);
    expect(error).toMatchObject({ code: "invalid_input", httpStatus: 400 });
    expect((error as InputValidationError).issues.map((i) => i.path)).toEqual(["$.amountCents"]);
    const notJson = { cartId: "c-val", amountCents: 5, extra: 10n } as unknown as {
      cartId: string;
      amountCents: number;
    };
    await expect(s.engine.runOnce(s.checkout, { tenantId: "val", key: "v-2", input: notJson })).rejects.toBeInstanceOf(
      InputValidationError,
    );
    expect(await countRuns(t.db, { tenantId: "val" })).toBe(0);
    expect(s.counters).toEqual({ create_order: 0, charge: 0, record_charge: 0 });
  });

  it("malformed key or tenant: InvalidIdempotencyKeyError (400), no row", async () => {
    const s = setup();
    const input = { cartId: "c-badkey", amountCents: 5 };
    for (const [tenantId, key] of [
      ["val2", ""],
      ["val2", "   "],
      ["val2", "a\u0000b"],
      ["val2", "x".repeat(256)],
      ["val2", "é".repeat(128)],
      ["", "k"],
      ["\u007f", "k"],
    ]) {
      const error = await s.engine
        .runOnce(s.checkout, { tenantId: tenantId as string, key: key as string, input })
        .catch((e) => e);
      expect(error, JSON.stringify([tenantId, key])).toBeInstanceOf(InvalidIdempotencyKeyError);
      expect(error).toMatchObject({ code: "invalid_key", httpStatus: 400 });
    }
    expect(await countRuns(t.db, { tenantId: "val2" })).toBe(0);
    expect(s.counters.create_order).toBe(0);
  });

  it("a malformed key, a non-JSON input or a zod failure sends no SQL at all", async () => {
    const queries: string[] = [];
    const pool = new pg.Pool({ connectionString: t.url, max: 1 });
    const logged = new Kysely({ dialect: new PostgresDialect({ pool }), log: (e) => void queries.push(e.query.sql) });
    const s = setup();
    const engine = createEngine({ db: logged, leaseMs: LEASE });
    const calls = [
      () => engine.runOnce(s.checkout, { tenantId: "val4", key: "bad\nkey", input: { cartId: "c", amountCents: 5 } }),
      () => engine.runOnce(s.checkout, { tenantId: "val4", key: "k", input: { cartId: "c", amountCents: Number.NaN } }),
      () => engine.runOnce(s.checkout, { tenantId: "val4", key: "k", input: { cartId: "c", amountCents: 1.5 } }),
    ];
    for (const call of calls) await expect(call()).rejects.toMatchObject({ httpStatus: 400 });
    expect(queries).toEqual([]);
    await logged.destroy();
  });

  it("invalid input against an in-flight key is refused with 400 and leaves the record unchanged", async () => {
    const s = setup();
    const before = await inFlightAfterCharge(s, "val-3", { cartId: "c-val3", amountCents: 5 });
    await expect(
      s.engine.runOnce(s.checkout, { tenantId: T, key: "val-3", input: { cartId: "c-val3", amountCents: 0 } }),
    ).rejects.toBeInstanceOf(InputValidationError);
    expect(await recordSnapshot(s.engine, T, "val-3")).toEqual(before);
  });
});
