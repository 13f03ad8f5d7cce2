import { describe, expect, it } from "vitest";
import { createEngine } from "../src/index.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();

describe("checkout happy path", () => {
  it("runs once and replays", async () => {
    const payments = new FakePayments();
    const { workflow, counters } = makeCheckout(payments);
    const engine = createEngine({ db: t.db, leaseMs: 1000 });
    const input = { cartId: "c1", amountCents: 500 };
    const first = await engine.runOnce(workflow, { tenantId: "t1", key: "k1", input });
    expect(first.status).toBe(201);
    expect(first.replayed).toBe(false);
    const again = await engine.runOnce(workflow, { tenantId: "t1", key: "k1", input });
    expect(again).toEqual({ ...first, replayed: true });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    const rec = await engine.inspect("t1", "k1");
    expect(rec?.status).toBe("completed");
    expect(rec?.history?.map((h) => `${h.name}:${h.outcome}`)).toEqual([
      "create_order:succeeded",
      "charge:succeeded",
      "record_charge:succeeded",
    ]);
  });
});
