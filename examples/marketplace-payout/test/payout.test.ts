/**
 * The payout on PostgreSQL, with two engines on pools of their own (two
 * processes, as far as the database can tell), each running a worker:
 * every order's run fans out one child per seller, each seller is paid
 * once per order, the merchant's limit holds across both workers (each
 * alone would run up to eight transfers at once), and the provider's
 * requests stay within its rate.
 */
import { createEngine, deriveChildKey } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { addOrders, createMarketplaceTables, payoutCounts } from "../src/marketplace-tables.ts";
import { ORDERS, payoutKey, TENANT, totalCents } from "../src/orders.ts";
import { PayoutProvider } from "../src/payout-provider.ts";
import { payoutWorkflows, RATE_LIMITS, TRANSFERS_PER_MERCHANT } from "../src/workflows.ts";

const clone = useClonedDatabase("idempo_payout", { prepare: (db) => createMarketplaceTables(db) });

describe("marketplace payout on PostgreSQL, two workers", () => {
  it("pays each seller once per order, at most two transfers at once per merchant, under the rate", async () => {
    await addOrders(clone.db, TENANT, ORDERS);
    const provider = new PayoutProvider();
    const flows = payoutWorkflows(provider);
    const engines = [clone.db, clone.connect()].map((db) => createEngine({ db, rateLimits: RATE_LIMITS }));
    const [first] = engines;
    if (!first) throw new Error("no engine");
    for (const o of ORDERS) {
      const res = await first.enqueue(clone.db, flows.payoutOrder, {
        tenantId: TENANT,
        key: payoutKey(o.id),
        input: { orderId: o.id },
      });
      expect(res.created).toBe(true);
    }
    const workers = engines.map((e) =>
      e.startWorker({ workflows: [flows.payoutOrder, flows.sellerTransfer], concurrency: 8, intervalMs: 50 }),
    );
    try {
      for (const o of ORDERS) {
        const res = await first.wait(TENANT, payoutKey(o.id), { timeoutMs: 60_000 });
        expect(res.status).toBe(200);
        const body = res.body as { transfers: { sellerId: string }[] };
        // The results come back in input order: the order's lines by seller.
        expect(body.transfers.map((t) => t.sellerId)).toEqual(o.lines.map((l) => l.sellerId).sort());
      }
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }

    const lines = ORDERS.reduce((n, o) => n + o.lines.length, 0);
    expect(await payoutCounts(clone.db, TENANT)).toEqual({
      ordersPaidOut: ORDERS.length,
      payouts: lines,
      paidOutCents: totalCents(ORDERS),
      missing: 0,
    });
    // One lost answer, asked again under the same key: one request more, no transfer more.
    expect(provider.counts).toEqual({
      requests: lines + 1,
      replays: 1,
      transfers: lines,
      transferredCents: totalCents(ORDERS),
      lostAnswers: 1,
      refused: 0,
    });
    expect(provider.duplicateTransfers()).toBe(0);
    for (const m of new Set(ORDERS.map((o) => o.merchantId))) {
      expect(provider.mostInFlight(m)).toBeLessThanOrEqual(TRANSFERS_PER_MERCHANT);
    }
    // m_books has seven transfers: with the limit they queue, two at a time, across both workers.
    expect(provider.mostInFlight("m_books")).toBe(TRANSFERS_PER_MERCHANT);
    // The shared bucket kept both workers under the provider's own limit: no request refused.
    expect(provider.counts.refused).toBe(0);

    // Each order's run shows one child per seller, under keys derived from its own, and each child its parent.
    for (const o of ORDERS) {
      const record = await first.inspect(TENANT, payoutKey(o.id));
      const children = record?.status === "expired" ? [] : (record?.children ?? []);
      expect(children.map((c) => [c.key, c.outcome])).toEqual(
        o.lines.map((_, i) => [deriveChildKey(TENANT, payoutKey(o.id), "payout_order", "transfers", i), "succeeded"]),
      );
      const child = await first.inspect(TENANT, children[0]?.key ?? "");
      expect(child?.status === "expired" ? null : child?.parent).toEqual({
        key: payoutKey(o.id),
        item: "transfers",
        index: 0,
      });
    }
  });
});
