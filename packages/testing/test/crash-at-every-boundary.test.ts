/**
 * crashAtEveryBoundary on the SPEC checkout passes at every boundary, and
 * flags the broken variants at the boundary where they repeat an effect.
 * Effects are counted independently of the report too, so a helper that
 * silently skipped its crashes could not pass.
 */
import { createEngine, deriveStepKey, workflow } from "@idempo/core";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { assertExactlyOnce, boundariesOf, crashAtEveryBoundary, ExactlyOnceError } from "../src/index.ts";
import { checkoutEffects, makeCheckout, makeCheckoutWithWriteInStep } from "./support/checkout.ts";
import { useTestDatabase } from "./support/database.ts";
import { FakeProvider } from "./support/provider.ts";

const t = useTestDatabase();
const input = { cartId: "cart-1", amountCents: 4200 };

const CHECKOUT_POINTS = [
  "before:phase:create_order",
  "after:phase:create_order",
  "before:step:charge",
  "called:step:charge",
  "after:step:charge",
  "before:phase:record_charge",
  "after:phase:record_charge",
];

describe("boundariesOf", () => {
  it("lists before and after each phase, and before, called and after each step, in run order", () => {
    expect(boundariesOf(makeCheckout(new FakeProvider()))).toEqual(CHECKOUT_POINTS);
  });
});

describe("crashAtEveryBoundary on the SPEC checkout", () => {
  it("passes at every boundary: one order, one charge, one paid order and one receipt per run", async () => {
    const provider = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const tenantId = "shop-ok";
    const report = await crashAtEveryBoundary(engine, makeCheckout(provider), input, {
      effects: checkoutEffects(t.db, provider, tenantId),
      tenantId,
      keyPrefix: "ok-",
    });

    expect(report.ok, report.table).toBe(true);
    expect(() => assertExactlyOnce(report)).not.toThrow();
    expect(report.failures).toEqual([]);
    expect(report.boundaries.map((b) => [b.point, b.outcome, b.status])).toEqual(
      CHECKOUT_POINTS.map((p) => [p, "passed", 201]),
    );
    // A crash before the last commit leaves work for a takeover (attempt 2); after it, the retry replays.
    expect(report.boundaries.map((b) => b.attempts)).toEqual([2, 2, 2, 2, 2, 2, 1]);
    for (const b of [report.baseline, ...report.boundaries]) {
      expect(b.effects).toEqual({
        orders: { expected: 1, actual: 1 },
        paid: { expected: 1, actual: 1 },
        charges: { expected: 1, actual: 1 },
        receipts: { expected: 1, actual: 1 },
      });
      expect(b.derivedKeys).toEqual({ charge: [deriveStepKey(tenantId, b.key, "checkout", "charge")] });
    }

    // Independent of the report: 8 runs (no crash + 7 boundaries), each once; the provider was
    // called one extra time, by the retry after the crash between the call and its record.
    expect(provider.charges).toBe(8);
    expect(provider.calls).toHaveLength(9);
    const { rows } = await sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} GROUP BY status`.execute(t.db);
    expect(rows).toEqual([{ status: "paid", n: 8 }]);
    const runs = await engine.listKeys({ tenantId, limit: 100 });
    expect(runs.items.map((r) => [r.key, r.status]).sort()).toEqual(
      ["ok-none", ...CHECKOUT_POINTS.map((p) => `ok-${p}`)].map((k) => [k, "completed"]).sort(),
    );

    expect(report.table).toContain("every effect exactly once at 7 boundaries");
    expect(report.table).toMatch(/^called:step:charge +ok +201 +2 +1 +1 +1 +1 +charge:1$/m);
  });

  it("detaches its fault hook: a later run on the engine is not crashed", async () => {
    const provider = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const checkout = makeCheckout(provider);
    await crashAtEveryBoundary(engine, checkout, input, { effects: { charges: () => provider.charges } });
    const res = await engine.runOnce(checkout, { tenantId: "after", key: "k", input });
    expect(res).toMatchObject({ status: 201, replayed: false });
  });

  it("gives each run its own input when input is a function", async () => {
    const provider = new FakeProvider();
    const tenantId = "shop-fn";
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      makeCheckout(provider),
      ({ point }) => ({ cartId: `cart-${point}`, amountCents: 100 }),
      { effects: checkoutEffects(t.db, provider, tenantId), tenantId },
    );
    assertExactlyOnce(report);
    const { rows } = await sql<{ n: number }>`
      SELECT count(DISTINCT cart_id)::int AS n FROM orders WHERE tenant_id = ${tenantId}`.execute(t.db);
    expect(rows[0]?.n).toBe(8);
  });
});

describe("crashAtEveryBoundary flags broken workflows", () => {
  it("a step that mints its own key instead of passing the derived key charges twice at called:step:charge", async () => {
    const provider = new FakeProvider();
    const tenantId = "shop-own-key";
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      makeCheckout(provider, { chargeKey: "fresh-per-call" }),
      input,
      { effects: checkoutEffects(t.db, provider, tenantId), tenantId },
    );

    expect(report.ok).toBe(false);
    expect(report.failures.map((f) => f.point)).toEqual(["called:step:charge"]);
    const failure = report.failures[0];
    expect(failure?.effects.charges).toEqual({ expected: 1, actual: 2 });
    expect(failure?.effects.orders).toEqual({ expected: 1, actual: 1 });
    expect(failure?.problems).toEqual([
      expect.stringMatching(/^'charges' happened 2 times, expected 1: step 'charge' was called again .*idempotencyKey/),
    ]);
    // Independently: one extra charge, made by the retry of the one crashed call.
    expect(provider.charges).toBe(9);

    const error = (() => {
      try {
        assertExactlyOnce(report);
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ExactlyOnceError);
    expect((error as ExactlyOnceError).report).toBe(report);
    const message = (error as Error).message;
    expect(message).toContain("crashAtEveryBoundary(checkout): 1 of 8 runs FAILED");
    expect(message).toMatch(/^called:step:charge +FAILED +201 +2 +1 +1 +2 \(want 1\) +1 +charge:1$/m);
    expect(message).toContain("problems:\n  called:step:charge: 'charges' happened 2 times, expected 1");
  });

  // BR-34: a takeover that sends other params under the same derived key gets the provider's 400.
  it("a step that sends the clock and a nonce is flagged for different params under one key at called:step:charge", async () => {
    const provider = new FakeProvider();
    const tenantId = "shop-volatile";
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      makeCheckout(provider, { volatileParams: true }),
      input,
      { effects: checkoutEffects(t.db, provider, tenantId), tenantId, requests: () => provider.requests },
    );
    expect(report.ok).toBe(false);
    expect(report.failures.map((f) => f.point)).toEqual(["called:step:charge"]);
    expect(report.failures[0]?.problems).toContainEqual(
      expect.stringMatching(
        /^step 'charge' sent 2 different params under one derived key across its calls: .*never from the clock or randomness/,
      ),
    );
    // The provider refused the changed params, so the retry failed too.
    expect(report.failures[0]?.problems).toContainEqual(expect.stringMatching(/reused with different parameters/));
  });

  it("the same check passes a step that sends params from input and state only", async () => {
    const provider = new FakeProvider();
    const tenantId = "shop-stable";
    const report = await crashAtEveryBoundary(createEngine({ db: t.db }), makeCheckout(provider), input, {
      effects: checkoutEffects(t.db, provider, tenantId),
      tenantId,
      requests: () => provider.requests,
    });
    expect(report.ok, report.table).toBe(true);
    // The check had something to compare: the crash at called:step:charge made the step call twice.
    const crashed = deriveStepKey(tenantId, report.boundaries[3]?.key ?? "", "checkout", "charge");
    expect(provider.requests.filter((r) => r.idempotencyKey === crashed)).toHaveLength(2);
  });

  it("a step that writes to the database itself writes twice at called:step:charge", async () => {
    const provider = new FakeProvider();
    const tenantId = "shop-write-in-step";
    const audits = async () =>
      (
        await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND status = 'audit'`.execute(t.db)
      ).rows[0]?.n ?? -1;
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      makeCheckoutWithWriteInStep(t.db, provider),
      input,
      { effects: { audits, charges: () => provider.charges }, tenantId },
    );
    expect(report.failures.map((f) => [f.point, f.effects])).toEqual([
      ["called:step:charge", { audits: { expected: 1, actual: 2 }, charges: { expected: 1, actual: 1 } }],
    ]);
    expect(() => assertExactlyOnce(report)).toThrow(/called:step:charge: 'audits' happened 2 times/);
  });

  it("a counter that does not match one run fails the run without a crash, with a hint", async () => {
    const provider = new FakeProvider();
    const report = await crashAtEveryBoundary(createEngine({ db: t.db }), makeCheckout(provider), input, {
      // Each run creates one charge; claiming two is a wrong expectation, not a duplicate.
      effects: { charges: { count: () => provider.charges, perRun: 2 } },
    });
    expect(report.ok).toBe(false);
    expect(report.baseline.outcome).toBe("failed");
    expect(report.baseline.problems).toEqual([
      "'charges' happened 1 time, expected 2 in a run without a crash: does the counter read the right table and tenant?",
    ]);
  });

  it("reports a counter that throws instead of throwing itself", async () => {
    const provider = new FakeProvider();
    const report = await crashAtEveryBoundary(createEngine({ db: t.db }), makeCheckout(provider), input, {
      effects: {
        broken: () => {
          throw new Error("no such table");
        },
      },
    });
    expect(report.ok).toBe(false);
    expect(report.baseline.problems).toContain(
      "the counter of 'broken' threw or returned something other than a number",
    );
    expect(report.table).toMatch(/^\(no crash\) +FAILED +201 +1 +error +charge:1$/m);
  });
});

describe("crashAtEveryBoundary with runs that end early", () => {
  it("skips the boundaries a run never reaches after ctx.fail, and checks the stored failure is replayed", async () => {
    let calls = 0;
    const declined = workflow("declined")
      .step("charge", ({ fail }) => {
        calls++;
        return fail(402, { error: "card_declined" });
      })
      .phase("record_charge", () => ({}))
      .respond(() => ({ status: 201, body: {} }));
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      declined,
      {},
      {
        effects: { calls: () => calls },
      },
    );
    assertExactlyOnce(report);
    expect(report.baseline.status).toBe(402);
    expect(report.boundaries.map((b) => [b.point, b.outcome])).toEqual([
      ["before:step:charge", "passed"],
      ["called:step:charge", "skipped"],
      ["after:step:charge", "skipped"],
      ["before:phase:record_charge", "skipped"],
      ["after:phase:record_charge", "skipped"],
    ]);
  });

  it("refuses to run without an effect to count, or with a negative count", async () => {
    await expect(
      crashAtEveryBoundary(createEngine({ db: t.db }), makeCheckout(new FakeProvider()), input, { effects: {} }),
    ).rejects.toThrow(TypeError);
    await expect(
      crashAtEveryBoundary(createEngine({ db: t.db }), makeCheckout(new FakeProvider()), input, {
        effects: { charges: { count: () => 0, perRun: -1 } },
      }),
    ).rejects.toThrow("effect 'charges' needs a counter function and a perRun count of 0 or more");
  });
});
