/**
 * Three months of renewals on PostgreSQL, in a unit test with the test
 * clock: each plan's tick starts one run, each decline is retried a day
 * later (not an hour sooner), a lost answer is asked again with the same
 * key, and no period is charged twice. Nothing waits for real time and no
 * worker runs: the clock fires the ticks and runs what becomes due here.
 */
import { createEngine } from "@idempo/core";
import { createTestClock } from "@idempo/testing";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { addSubscribers, createBillingTables } from "../src/billing-tables.ts";
import { CardProcessor } from "../src/card-processor.ts";
import { registerPlanSchedules } from "../src/schedules.ts";
import { invoiceCounts, nextTick, SUBSCRIBERS, TENANT } from "../src/simulation.ts";
import { billingWorkflows, DAY_MS, renewalKey } from "../src/workflows.ts";

const clone = useClonedDatabase("idempo_renewal", { prepare: (db) => createBillingTables(db) });
const HOUR = 60 * 60 * 1000;

describe("subscription renewal under the test clock", () => {
  it("bills three months: one run per tick, each decline retried a day later, no period charged twice", async () => {
    await addSubscribers(clone.db, TENANT, SUBSCRIBERS);
    const engine = createEngine({ db: clone.db });
    const cards = new CardProcessor();
    const flows = billingWorkflows(engine, cards);
    const clock = createTestClock(engine, { workflows: [flows.billPlan, flows.renewal] });
    await registerPlanSchedules(engine, flows, TENANT);

    const january = await nextTick(clock, engine, clone.db);
    expect(january.at.getUTCDate()).toBe(1);
    expect(january.report.ticks).toBe(2);
    // Alice, Bob and Dave once; Carol twice: her answer was lost, and the step asked again with the same key.
    expect(cards.counts).toMatchObject({ requests: 5, replays: 1, charges: 2, declines: 2 });
    const plan = january.report.resumed.find((r) => r.workflow === "bill_plan");
    const input = (await engine.inspect(TENANT, plan?.key ?? ""))?.input as { plan: "basic"; period: string };
    expect(await engine.enqueue(clone.db, flows.billPlan, { tenantId: TENANT, key: plan?.key ?? "", input })).toEqual({
      created: false,
    });

    // The declined renewals sleep for a day: an hour short of it, nothing runs.
    expect((await clock.advance(DAY_MS - HOUR)).resumed).toEqual([]);
    expect(cards.counts.requests).toBe(5);
    const retries = await clock.advance(HOUR);
    expect(retries.resumed.map((r) => [r.key, r.status]).sort()).toEqual([
      [renewalKey("sub_bob", input.period), 200],
      [renewalKey("sub_dave", input.period), 402],
    ]);

    for (let month = 2; month <= 3; month++) {
      expect((await nextTick(clock, engine, clone.db)).report.ticks).toBe(2);
      await clock.advance(DAY_MS);
    }
    expect(await invoiceCounts(clone.db, TENANT)).toEqual({
      invoices: 10,
      paidFirstTry: 6,
      retried: 4,
      paidOnRetry: 3,
      failed: 1,
      paidCents: 14_100,
      pastDue: 1,
    });
    expect(cards.counts).toEqual({
      requests: 15,
      replays: 1,
      charges: 9,
      chargedCents: 14_100,
      declines: 5,
      lostAnswers: 1,
    });
    expect(cards.duplicateCharges()).toBe(0);
  });
});
