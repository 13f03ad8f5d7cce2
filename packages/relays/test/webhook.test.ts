/**
 * Signed webhooks through the real relay to a loopback receiver that fails,
 * hangs, drops the connection and answers late: every committed message is
 * applied exactly once by a receiver that deduplicates on Idempotency-Key,
 * and a message the receiver never accepts ends as a dead letter.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { WebhookSenderOptions } from "../src/webhook/index.ts";
import { createWebhookSender, RelayOptionsError, WebhookDeliveryError } from "../src/webhook/index.ts";
import { outboxRows, receivedCount, useRelayDatabase } from "./support/database.ts";
import type { Arrival, Behaviour } from "./support/webhook-receiver.ts";
import { startReceiver } from "./support/webhook-receiver.ts";
import { commitOrders, TOPIC, until } from "./support/workload.ts";

const t = useRelayDatabase();
const uid = () => randomUUID().slice(0, 8);
const SECRET = "whsec_test_0123456789";

describe("webhook sender", () => {
  let engine: Engine;
  beforeAll(() => {
    engine = createEngine({ db: t.db });
  });

  async function receiver(tenant: string, behave: (a: Arrival) => Behaviour) {
    const r = await startReceiver(t.db, tenant, SECRET, behave);
    onTestFinished(() => r.close());
    return r;
  }

  function startRelay(options: Omit<WebhookSenderOptions, "secret"> & { secret?: string }, extra = {}) {
    const errors: unknown[] = [];
    const relay = engine.startRelay({
      handlers: { [TOPIC]: createWebhookSender({ secret: SECRET, ...options }) },
      concurrency: 4,
      pollIntervalMs: 100,
      backoffMs: 20,
      maxBackoffMs: 200,
      onError: (e) => errors.push(e),
      ...extra,
    });
    onTestFinished(() => relay.stop());
    return errors;
  }

  const settled = (tenant: string) =>
    until("no row pending", async () => (await outboxRows(t.db, tenant)).every((r) => r.status !== "pending"));

  it("POSTs a signed event with Idempotency-Key = delivery key; 5xx answers are retried until accepted", async () => {
    const tenant = `w1-${uid()}`;
    await commitOrders(engine, tenant, 8);
    let failures = 3;
    const r = await receiver(tenant, () => (failures-- > 0 ? { kind: "status", status: 503 } : { kind: "ok" }));
    const errors = startRelay({ url: r.url });
    await settled(tenant);
    const rows = await outboxRows(t.db, tenant);
    expect(rows.every((row) => row.status === "delivered")).toBe(true);
    expect(r.arrivals).toHaveLength(8 + 3);
    expect(new Set(r.arrivals.map((a) => a.key))).toEqual(new Set(rows.map((row) => row.deliveryKey)));
    expect(await receivedCount(t.db, tenant)).toBe(8);
    for (const a of r.arrivals) expect(a.event).toMatchObject({ topic: TOPIC, tenantId: tenant, id: a.key });
    expect(r.refused).toBe(0);
    const statuses = errors.map((e) => (e instanceof WebhookDeliveryError ? [e.status, e.retryable] : e));
    expect(statuses).toEqual([
      [503, true],
      [503, true],
      [503, true],
    ]);
  });

  it("a receiver that hangs is given up on after timeoutMs and retried; each message applied once", async () => {
    const tenant = `w2-${uid()}`;
    await commitOrders(engine, tenant, 6);
    // The first request of three of the messages is never answered.
    const hangs = new Set<string>();
    const r = await receiver(tenant, (a) => {
      if (a.nth === 1 && hangs.size < 3) hangs.add(a.key);
      return a.nth === 1 && hangs.has(a.key) ? { kind: "hang" } : { kind: "ok" };
    });
    startRelay({ url: r.url, timeoutMs: 500 });
    await settled(tenant);
    const rows = await outboxRows(t.db, tenant);
    expect(rows.every((row) => row.status === "delivered")).toBe(true);
    for (const key of hangs) expect(r.count(key)).toBeGreaterThanOrEqual(2);
    expect(await receivedCount(t.db, tenant)).toBe(6);
  });

  it("a receiver that answers late (after the sender gave up) gets the message again and applies it once", async () => {
    const tenant = `w3-${uid()}`;
    await commitOrders(engine, tenant, 6);
    const late = new Set<string>();
    const r = await receiver(tenant, (a) => {
      if (a.nth === 1 && late.size < 2) {
        late.add(a.key);
        return { kind: "late" };
      }
      return { kind: "ok" };
    });
    startRelay({ url: r.url, timeoutMs: 500 });
    await settled(tenant);
    expect((await outboxRows(t.db, tenant)).every((row) => row.status === "delivered")).toBe(true);
    expect(late.size).toBe(2);
    // The receiver acted on the first request; the retry is a copy the key lets it drop.
    for (const key of late) expect(r.count(key)).toBeGreaterThanOrEqual(2);
    expect(await receivedCount(t.db, tenant)).toBe(6);
  });

  it("a dropped connection is a network error and is retried", async () => {
    const tenant = `w4-${uid()}`;
    await commitOrders(engine, tenant, 4);
    let drops = 2;
    const r = await receiver(tenant, () => (drops-- > 0 ? { kind: "drop" } : { kind: "ok" }));
    const errors = startRelay({ url: r.url });
    await settled(tenant);
    expect((await outboxRows(t.db, tenant)).every((row) => row.status === "delivered")).toBe(true);
    expect(r.arrivals).toHaveLength(4 + 2);
    expect(errors).toHaveLength(2);
    for (const e of errors) expect(e).toMatchObject({ code: "webhook_failed", status: undefined, retryable: true });
  });

  it("a receiver that keeps failing dead-letters the message after maxAttempts, with the last answer as its error", async () => {
    const tenant = `w5-${uid()}`;
    await commitOrders(engine, tenant, 2);
    // One message always gets a 500, the other always a 422.
    const r = await receiver(tenant, (a) =>
      JSON.stringify(a.event.payload).includes("o-0000")
        ? { kind: "status", status: 500 }
        : { kind: "status", status: 422 },
    );
    startRelay({ url: r.url }, { maxAttempts: 3 });
    await settled(tenant);
    const rows = await outboxRows(t.db, tenant);
    expect(rows.map((row) => [row.status, row.attempts])).toEqual([
      ["dead", 3],
      ["dead", 3],
    ]);
    expect(rows.map((row) => row.lastError?.replace(/127\.0\.0\.1:\d+/, "host")).sort()).toEqual([
      "host answered 422: refused with 422",
      "host answered 500: refused with 500",
    ]);
    expect(r.arrivals).toHaveLength(6);
  });

  it("a receiver nobody listens for (connection refused) dead-letters after maxAttempts", async () => {
    const tenant = `w6-${uid()}`;
    await commitOrders(engine, tenant, 1);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    startRelay({ url: `http://127.0.0.1:${port}/` }, { maxAttempts: 2 });
    await settled(tenant);
    const [row] = await outboxRows(t.db, tenant);
    expect(row).toMatchObject({ status: "dead", attempts: 2 });
    expect(row?.lastError).toMatch(/ECONNREFUSED/);
  });

  it("a receiver with another secret refuses every request; nothing is marked delivered", async () => {
    const tenant = `w7-${uid()}`;
    await commitOrders(engine, tenant, 1);
    const r = await receiver(tenant, () => ({ kind: "ok" }));
    startRelay({ url: r.url, secret: "whsec_other" }, { maxAttempts: 2 });
    await settled(tenant);
    expect((await outboxRows(t.db, tenant))[0]).toMatchObject({ status: "dead", attempts: 2 });
    expect(r.refused).toBe(2);
    expect(r.arrivals).toHaveLength(0);
  });

  it("refuses unusable options when created", () => {
    expect(() => createWebhookSender({ url: "not a url", secret: SECRET })).toThrow(RelayOptionsError);
    expect(() => createWebhookSender({ url: "ftp://x.example/", secret: SECRET })).toThrow(RelayOptionsError);
    expect(() => createWebhookSender({ url: "https://x.example/", secret: "" })).toThrow(RelayOptionsError);
    expect(() => createWebhookSender({ url: "https://x.example/", secret: SECRET, timeoutMs: 0 })).toThrow(
      RelayOptionsError,
    );
  });
});
