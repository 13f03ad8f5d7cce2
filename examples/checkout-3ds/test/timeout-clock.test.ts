/**
 * The 3-D Secure checkout's fifteen minutes, in a unit test with the test
 * clock: an order never confirmed is voided at its timeout, and the
 * provider's webhook that arrives after ten minutes still captures the
 * other. Nothing waits for real time: the clock moves the engine's time and
 * runs what becomes due in the test's own process, so no worker runs.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { createTestClock, type TestClock } from "@idempo/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { call } from "../src/client.ts";
import { createOrdersTable, orderStatuses } from "../src/orders.ts";
import { FakePsp } from "../src/psp.ts";
import { PspClient } from "../src/psp-client.ts";
import { checkout3ds } from "../src/workflow.ts";
import { type ShopServer, serveShop } from "./support/shop-server.ts";

const clone = useClonedDatabase("idempo_3ds_clock", { prepare: (db) => createOrdersTable(db) });
const TENANT = "acme";
const SECRET = "whsec_test";
const MINUTE = 60_000;

const psp = new FakePsp({ webhookSecret: SECRET });
let engine: Engine;
let clock: TestClock;
let shop: ShopServer | undefined;
let shopUrl = "";

beforeAll(async () => {
  const pspUrl = await psp.start();
  engine = createEngine({ db: clone.db });
  const flow = checkout3ds(new PspClient(pspUrl), { confirmTimeoutMs: 15 * MINUTE });
  clock = createTestClock(engine, { workflows: [flow] });
  shop = await serveShop(engine, flow, psp, SECRET);
  shopUrl = shop.url;
});

afterAll(async () => {
  await shop?.close();
  await psp.close();
});

const statusOf = async (key: string) => (await engine.inspect(TENANT, key))?.status;

describe("checkout-3ds under the test clock", () => {
  it("captures the order confirmed after 10 minutes and voids the one never confirmed at 15", async () => {
    const late = { key: "clock-late", input: { cartId: "cart-late", amountCents: 4999 } };
    const never = { key: "clock-never", input: { cartId: "cart-never", amountCents: 2500 } };
    for (const o of [late, never]) {
      expect((await call(shopUrl, "/checkouts", { key: o.key, json: o.input })).status).toBe(202);
    }

    // Ten minutes pass: both still wait for their challenge.
    expect((await clock.advance(10 * MINUTE)).resumed).toEqual([]);
    expect([await statusOf(late.key), await statusOf(never.key)]).toEqual(["suspended", "suspended"]);

    // The customer passes the challenge; the provider's webhook (repeated once) signals the run.
    const paymentId = ((await engine.inspect(TENANT, late.key))?.state as { paymentId?: string } | undefined)
      ?.paymentId;
    if (!paymentId) throw new Error("the authorize step should have recorded the payment");
    expect((await psp.confirm(paymentId, { repeats: 1 })).map((d) => d.status)).toEqual([200, 200]);
    const confirmed = await clock.runUntilIdle();
    expect(confirmed.resumed).toEqual([expect.objectContaining({ key: late.key, status: 201 })]);

    // Five minutes more: the other order's fifteen minutes are up.
    const timedOut = await clock.advance(5 * MINUTE);
    expect(timedOut.resumed).toEqual([expect.objectContaining({ key: never.key, status: 402 })]);

    const statuses = await orderStatuses(clone.db, TENANT, [late.input.cartId, never.input.cartId]);
    expect({
      orders: [statuses.get(late.input.cartId), statuses.get(never.input.cartId)],
      captures: psp.counts.captures,
      voids: psp.counts.voids,
    }).toEqual({ orders: ["paid", "voided"], captures: 1, voids: 1 });
    expect((await call(shopUrl, "/checkouts", { key: never.key, json: never.input })).body).toMatchObject({
      status: "voided",
      code: "3ds_not_completed",
    });
  });
});
