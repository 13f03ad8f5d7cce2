/**
 * The crash helpers know `.child`, `.map`, `.sleep` and `.waitFor` items: a
 * run passes their points twice (the start that suspends, the visit after
 * the children completed or the signal came), and `crashAtEveryBoundary`
 * resumes what is due to take a suspended run to its end, crashing the
 * first child of each item at the child's own boundaries too. An order
 * that settles in parallel, starts an invoice child and maps three payouts
 * passes at each of its 21 boundaries and the 10 of its first children,
 * with every child started once and every effect once, counted in the
 * orders table.
 */
import { randomUUID } from "node:crypto";
import { createEngine, deriveChildKey, workflow } from "@idempo/core";
import type { RawBuilder } from "kysely";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { boundariesOf, crashAtEveryBoundary, pauseAt } from "../src/index.ts";
import type { Shop } from "./support/database.ts";
import { useTestDatabase } from "./support/database.ts";
import { FAN_OUT_CRASHES, FAN_OUT_POINTS, makeFanOut } from "./support/fan-out.ts";
import { FakeProvider } from "./support/provider.ts";

const t = useTestDatabase();

/** A counter over a `SELECT count(*)::int AS n` query. */
const count = (query: RawBuilder<unknown>) => async () =>
  ((await query.execute(t.db)).rows[0] as { n: number } | undefined)?.n ?? -1;

describe("crash helpers and child runs", () => {
  it("boundariesOf lists a child or map item's start, its suspension and the visit after its children", () => {
    const p = () => new FakeProvider();
    expect(boundariesOf(makeFanOut("bo", p(), p(), p()))).toEqual(FAN_OUT_POINTS);
  });

  it("boundariesOf lists a sleep's suspension and a wait's two visits", () => {
    const wf = workflow("bo_wait")
      .phase("start", () => ({}))
      .sleep("cool_off", 0)
      .waitFor("approved")
      .respond(() => ({ status: 200, body: null }));
    expect(boundariesOf(wf)).toEqual([
      "before:phase:start",
      "after:phase:start",
      "after:sleep:cool_off",
      "locked:wait:approved",
      "after:wait:approved",
      "locked:wait:approved#2",
      "after:wait:approved#2",
    ]);
  });

  it("crashAtEveryBoundary passes at every boundary of .parallel, .child and .map: each child once, each effect once", async () => {
    const [payments, stock, transfers] = [new FakeProvider(), new FakeProvider(), new FakeProvider()];
    const engine = createEngine({ db: t.db });
    const tenantId = "fan-ok";
    const order = makeFanOut("fan", payments, stock, transfers);
    const report = await crashAtEveryBoundary(
      engine,
      order,
      {},
      {
        effects: {
          paid: count(sql`SELECT count(*)::int AS n FROM orders
                        WHERE tenant_id = ${tenantId} AND cart_id = 'parent' AND charge_id IS NOT NULL`),
          payouts: {
            count: count(
              sql`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND cart_id LIKE 'child-%'`,
            ),
            perRun: 4,
          },
          charges: () => payments.charges,
          reservations: () => stock.charges,
          transfers: { count: () => transfers.charges, perRun: 4 },
        },
        requests: () => [...payments.requests, ...stock.requests, ...transfers.requests],
        tenantId,
        keyPrefix: "fan-ok-",
      },
    );
    expect(report.ok, report.table).toBe(true);
    expect(report.baseline.status).toBe(201);
    expect(report.boundaries.map((b) => [b.point, b.outcome, b.status])).toEqual(
      FAN_OUT_CRASHES.map((p) => [p, "passed", 201]),
    );

    // Independent of the report: 32 runs (no crash, 21 boundaries of the order, 10 inside its first children),
    // each completed with its one order marked paid, its four children each started once under its derived key.
    const runs = 1 + FAN_OUT_CRASHES.length;
    expect([payments.charges, stock.charges, transfers.charges]).toEqual([runs, runs, 4 * runs]);
    const { rows: orders } = await sql<{ cart_id: string; n: number }>`
      SELECT cart_id, count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} GROUP BY cart_id ORDER BY cart_id COLLATE "C"`.execute(
      t.db,
    );
    expect(orders).toEqual([
      { cart_id: "child-0", n: runs },
      { cart_id: "child-1", n: runs },
      { cart_id: "child-2", n: runs },
      { cart_id: "child-3", n: runs },
      { cart_id: "parent", n: runs },
    ]);
    const { rows: children } = await sql<{ parent_key: string; keys: string[]; attempts: number[] }>`
      SELECT parent_key, array_agg(key ORDER BY parent_item, child_index) AS keys,
             array_agg(attempt ORDER BY parent_item, child_index) AS attempts
      FROM idempo.runs WHERE tenant_id = ${tenantId} AND parent_key IS NOT NULL AND status = 'completed'
      GROUP BY parent_key`.execute(t.db);
    const parents = [report.baseline, ...report.boundaries].map((b) => b.key).sort();
    expect(children.map((c) => c.parent_key).sort()).toEqual(parents);
    for (const c of children) {
      expect(c.keys).toEqual([
        deriveChildKey(tenantId, c.parent_key, "fan_order", "invoice", 0),
        ...[0, 1, 2].map((i) => deriveChildKey(tenantId, c.parent_key, "fan_order", "payouts", i)),
      ]);
      // A child is run once; the one crashed is taken over once, unless the crash came after it completed.
      const crashed = /^fan-ok-(invoice|payouts)\[0\]:(.*)$/.exec(c.parent_key);
      const attempts = [1, 1, 1, 1];
      if (crashed && crashed[2] !== "after:phase:record") attempts[crashed[1] === "invoice" ? 0 : 1] = 2;
      expect(c.attempts, c.parent_key).toEqual(attempts);
    }
    // The same final response with or without a crash: the children's bodies in input order.
    for (const b of [report.baseline, ...report.boundaries]) {
      const rec = await engine.inspect(tenantId, b.key);
      expect(rec?.response?.body).toMatchObject({
        invoice: { n: 0 },
        payouts: [{ n: 1 }, { n: 2 }, { n: 3 }],
      });
    }
  });

  it("crashAtEveryBoundary over nested children, a map one child at a time and a map over no input", async () => {
    const transfers = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const tenantId = "nest-ok";
    const leaf = workflow<Shop>("nest_leaf")
      .input(z.object({ n: z.number().int() }))
      .phase("record", async ({ tx, tenantId: tenant, input }) => {
        await tx
          .insertInto("orders")
          .values({ id: `l_${randomUUID()}`, tenant_id: tenant, cart_id: `leaf-${input.n}`, amount_cents: input.n })
          .execute();
        return {};
      })
      .respond(({ input }) => ({ status: 200, body: input.n }));
    // A child that maps leaves itself: its children are grandchildren of the run crashed.
    const middle = workflow<Shop>("nest_middle")
      .input(z.object({ n: z.number().int() }))
      .step("transfer", ({ input, idempotencyKey }) => ({
        id: transfers.charge({ orderId: `m-${input.n}`, amountCents: input.n }, idempotencyKey).id,
      }))
      .map("leaves", leaf, ({ input }) => [{ n: input.n * 10 }, { n: input.n * 10 + 1 }])
      .respond(({ state }) => ({ status: 200, body: state.leaves.map((r) => r.body) }));
    const wf = workflow<Shop>("nest_order")
      .map("none", leaf, () => [])
      .map("middles", middle, () => [1, 2].map((n) => ({ n })), { concurrency: 1 })
      .respond(({ state }) => ({ status: 200, body: { none: state.none, middles: state.middles.map((r) => r.body) } }));
    const report = await crashAtEveryBoundary(
      engine,
      wf,
      {},
      {
        effects: {
          leaves: {
            count: count(
              sql`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId} AND cart_id LIKE 'leaf-%'`,
            ),
            perRun: 4,
          },
          transfers: { count: () => transfers.charges, perRun: 2 },
        },
        tenantId,
        keyPrefix: "nest-ok-",
      },
    );
    expect(report.ok, report.table).toBe(true);
    // A map over no input moves on at once: its visit after the children is never reached.
    const middle0 = ["before:step:transfer", "called:step:transfer", "after:step:transfer"]
      .concat(
        ["started", "read", "after"].map((p) => `${p}:map:leaves`),
        ["read:map:leaves#2", "after:map:leaves#2"],
      )
      .map((p) => [`middles[0]:${p}`, "passed"]);
    expect(report.boundaries.map((b) => [b.point, b.outcome])).toEqual([
      ["started:map:none", "passed"],
      ["read:map:none", "passed"],
      ["after:map:none", "passed"],
      // No first child to crash in either.
      ["none[0]:before:phase:record", "skipped"],
      ["none[0]:after:phase:record", "skipped"],
      ["read:map:none#2", "skipped"],
      ["after:map:none#2", "skipped"],
      ["started:map:middles", "passed"],
      ["read:map:middles", "passed"],
      ["after:map:middles", "passed"],
      ...middle0,
      ["read:map:middles#2", "passed"],
      ["after:map:middles#2", "passed"],
    ]);
    const rec = await engine.inspect(tenantId, "nest-ok-read:map:middles#2");
    expect(rec?.response?.body).toEqual({
      none: [],
      middles: [
        [10, 11],
        [20, 21],
      ],
    });
  });

  it("flags a child whose step mints its own key at the child's boundary where it is called again", async () => {
    const transfers = new FakeProvider();
    const payout = workflow("broken_payout")
      .input(z.object({ n: z.number().int() }))
      .step("transfer", ({ input }) =>
        transfers.charge({ orderId: `p-${input.n}`, amountCents: input.n }, randomUUID()),
      )
      .respond(() => ({ status: 200, body: null }));
    const wf = workflow("broken_payouts")
      .map("payouts", payout, () => [{ n: 1 }, { n: 2 }])
      .respond(() => ({ status: 200, body: null }));
    const report = await crashAtEveryBoundary(
      createEngine({ db: t.db }),
      wf,
      {},
      {
        effects: { transfers: { count: () => transfers.charges, perRun: 2 } },
        tenantId: "broken-child",
      },
    );
    expect(report.failures.map((f) => f.point)).toEqual(["payouts[0]:called:step:transfer"]);
    expect(report.failures[0]?.problems).toEqual([
      expect.stringMatching(/^'transfers' happened 3 times, expected 2: step 'transfer' was called again/),
    ]);
  });

  it("crashAtEveryBoundary sends the signal a wait needs and wakes a 0 ms sleep", async () => {
    const approvals = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const tenantId = "wait-ok";
    const wf = workflow<Shop>("wait_order")
      .phase("create_order", async ({ tx, tenantId: tenant }) => {
        const orderId = `o_${randomUUID()}`;
        await tx
          .insertInto("orders")
          .values({ id: orderId, tenant_id: tenant, cart_id: "w", amount_cents: 1 })
          .execute();
        return { orderId };
      })
      .sleep("cool_off", 0)
      .waitFor("approved", { schema: z.object({ by: z.string() }) })
      .step("notify", ({ state, idempotencyKey }) => ({
        notice: approvals.charge({ orderId: state.orderId, amountCents: 1 }, idempotencyKey).id,
      }))
      .respond(({ state }) => ({ status: 200, body: { by: state.approved.by } }));
    const report = await crashAtEveryBoundary(
      engine,
      wf,
      {},
      {
        effects: {
          orders: count(sql`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId}`),
          notices: () => approvals.charges,
        },
        signals: { approved: { by: "ops" } },
        tenantId,
        keyPrefix: "wait-ok-",
      },
    );
    expect(report.ok, report.table).toBe(true);
    expect(report.boundaries.map((b) => [b.point, b.outcome])).toEqual(boundariesOf(wf).map((p) => [p, "passed"]));
    expect(report.boundaries.map((b) => b.point)).toContain("locked:wait:approved#2");
  });

  it("a wait without its signal in signals fails with a hint instead of hanging", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("wait_unsent")
      .waitFor("approved")
      .respond(() => ({ status: 200, body: null }));
    const report = await crashAtEveryBoundary(
      engine,
      wf,
      {},
      {
        effects: { nothing: { count: () => 0, perRun: 0 } },
        tenantId: "wait-unsent",
      },
    );
    expect(report.ok).toBe(false);
    expect(report.baseline.problems).toContainEqual(
      "the run waits for signal 'approved': give its payload in the signals option",
    );
  });

  it("pauseAt holds the visit after the children completed with #2", async () => {
    const p = () => new FakeProvider();
    const engine = createEngine({ db: t.db });
    const order = makeFanOut("pause", p(), p(), p());
    const worker = engine.startWorker({ workflows: [order], sweep: false, intervalMs: 20 });
    try {
      const pause = pauseAt(engine, "read:child:invoice#2", { key: "held" });
      expect((await engine.runOnce(order, { tenantId: "fan-pause", key: "held", input: {} })).status).toBe(202);
      await pause.reached;
      // Held after reading the invoice's result: the item is not committed yet.
      const rec = await engine.inspect("fan-pause", "held");
      expect(rec?.children?.map((c) => [c.item, c.status])).toEqual([["invoice", "completed"]]);
      expect(rec?.recoveryPoint).toBe("settle");
      pause.release();
      await expect
        .poll(async () => (await engine.inspect("fan-pause", "held"))?.status, { timeout: 60_000 })
        .toBe("completed");
    } finally {
      await worker.stop();
    }
  });
});
