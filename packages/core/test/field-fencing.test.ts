/**
 * Field fault of the kind "fencing (who may clean up)": a refused request
 * (409, 422, 400) must never unlock, change or delete the record it was
 * refused by; only the owner's own ctx.reject removes a claim.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine, RunRecord } from "../src/index.ts";
import {
  createEngine,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  RunStateError,
} from "../src/index.ts";
import { setFaultHook } from "../src/internal.ts";
import { countOrders, deferred, frozenView, rejectionOf } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const payments = new FakePayments();
const { workflow: checkout, counters } = makeCheckout(payments);
let owner: Engine;
let other: Engine;

beforeAll(() => {
  owner = createEngine({ db: t.db, leaseMs: 1000 });
  other = createEngine({ db: t.connect(4), leaseMs: 1000 });
});

const call = (engine: Engine, key: string, amountCents: number) =>
  engine.runOnce(checkout, { tenantId: "t1", key, input: { cartId: "c1", amountCents } });

/** Run `refused`, check it failed as `errorClass`, and that k1 is exactly as before. */
async function expectRefusedWithoutChange(refused: () => Promise<unknown>, errorClass: new (...a: never[]) => Error) {
  const before = await owner.inspect("t1", "k1");
  const error = await rejectionOf(refused());
  expect(error).toBeInstanceOf(errorClass);
  const after = await owner.inspect("t1", "k1");
  expect(frozenView(after)).toEqual(frozenView(before));
  if (before?.status === "in_flight") {
    // Not released, not shortened to zero: the owner still holds a live lease.
    expect(after?.leaseRemainingMs).toBeGreaterThan(0);
  } else {
    expect(after).toEqual(before);
  }
  return error;
}

describe("fencing: refused requests never alter the record they were refused by (BR-10)", () => {
  it("while A is in flight and after it completes, B/C/D/E/G and a bad key leave k1 as it was", async () => {
    const reached = deferred();
    const proceed = deferred();
    setFaultHook(owner, async (point, run) => {
      if (run.key === "k1" && point === "before:phase:create_order") {
        reached.resolve();
        await proceed.promise;
      }
    });

    // A: in flight, held before create_order by its own engine.
    const a = call(owner, "k1", 500);
    await reached.promise;
    const inFlight = (await owner.inspect("t1", "k1")) as RunRecord;
    expect(inFlight).toMatchObject({ status: "in_flight", attempt: 1, ownerToken: expect.any(String) });

    // B: same payload -> 409.
    const b = await expectRefusedWithoutChange(() => call(other, "k1", 500), IdempotencyKeyInProgressError);
    expect(b).toMatchObject({ code: "key_in_progress", httpStatus: 409 });
    // C: another payload -> 422.
    const c = await expectRefusedWithoutChange(() => call(other, "k1", 999), IdempotencyKeyMismatchError);
    expect(c).toMatchObject({ code: "key_mismatch", httpStatus: 422 });
    // Input that fails zod -> 400, decided before the key is even looked at.
    await expectRefusedWithoutChange(() => call(other, "k1", -5), InputValidationError);
    // An invalid key that differs from k1 -> 400 and never touches k1.
    for (const bad of ["k1\n", "k1\u0000", "", " ".repeat(3), "k".repeat(256)]) {
      await expectRefusedWithoutChange(() => call(other, bad, 500), InvalidIdempotencyKeyError);
    }
    // D: same payload again, still in flight -> 409.
    await expectRefusedWithoutChange(() => call(other, "k1", 500), IdempotencyKeyInProgressError);
    expect((await owner.inspect("t1", "k1"))?.ownerToken).toBe(inFlight.ownerToken);

    proceed.resolve();
    const done = await a;
    expect(done).toMatchObject({ status: 201, replayed: false });
    const completed = await owner.inspect("t1", "k1");
    expect(completed).toMatchObject({ status: "completed", response: { status: 201, body: done.body } });

    // E: another payload after completion -> 422; still completed with A's response.
    await expectRefusedWithoutChange(() => call(other, "k1", 999), IdempotencyKeyMismatchError);
    // G: a body that fails zod -> 400.
    await expectRefusedWithoutChange(() => call(other, "k1", 0), InputValidationError);
    await expectRefusedWithoutChange(() => call(other, "k1\r\n", 500), InvalidIdempotencyKeyError);
    expect(await owner.inspect("t1", "k1")).toEqual(completed);

    // F: same payload -> replay of A's response.
    expect(await call(other, "k1", 500)).toEqual({ ...done, replayed: true });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(payments.calls).toHaveLength(1);
    expect(await countOrders(t.db)).toBe(1);
    setFaultHook(owner, undefined);
  });

  it("a refused caller's engine.release on a completed record does nothing", async () => {
    const first = await call(owner, "k2", 500);
    const before = await owner.inspect("t1", "k2");
    await expect(other.release("t1", "k2")).rejects.toBeInstanceOf(RunStateError);
    expect(await owner.inspect("t1", "k2")).toEqual(before);
    expect(await call(other, "k2", 500)).toEqual({ ...first, replayed: true });
  });
});
