/**
 * Fault of the kind "the delivery key names the attempt, not the message",
 * seen from the receiver: a phase run again by `retryFrom` enqueued its
 * message under a new delivery key, so a receiver deduplicating on it (a
 * webhook's `Idempotency-Key`, RabbitMQ's `message_id`, JetStream's
 * `Nats-Msg-Id`) applied it twice. Each relay delivers both committed rows;
 * each receiver counts what it applied, by delivery key.
 */
import { randomUUID } from "node:crypto";
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import type { JetStreamManager } from "@nats-io/jetstream";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { connect } from "@nats-io/transport-node";
import { connect as amqpConnect } from "amqplib";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createAmqpPublisher } from "../src/amqp/index.ts";
import { createJetStreamPublisher } from "../src/nats/index.ts";
import { createWebhookSender } from "../src/webhook/index.ts";
import { consumeQueue } from "./support/amqp-consumer.ts";
import { brokerUp, NATS_SERVER, RABBIT_URL } from "./support/brokers.ts";
import { applyOnce, outboxRows, receivedCount, useRelayDatabase } from "./support/database.ts";
import { createStream, readStream } from "./support/jetstream.ts";
import { startReceiver } from "./support/webhook-receiver.ts";
import { TOPIC, until } from "./support/workload.ts";

const rabbit = await brokerUp("RabbitMQ", "127.0.0.1", 5672);
const nats = await brokerUp("NATS JetStream", "127.0.0.1", 4222);
const t = useRelayDatabase();
const SECRET = "whsec_test_0123456789";
const uid = () => randomUUID().slice(0, 8);

const paid = workflow("order_paid_again")
  .phase("record_payment", async ({ outbox }) => {
    await outbox.enqueue(TOPIC, { orderId: "o-1" });
    return {};
  })
  .phase("finish", () => ({ done: true }))
  .respond(() => ({ status: 201, body: null }));

let engine: Engine;
beforeAll(() => {
  engine = createEngine({ db: t.db });
});

function relayWith(deliver: Parameters<Engine["startRelay"]>[0]["handlers"][string]): void {
  const relay = engine.startRelay({ handlers: { [TOPIC]: deliver }, pollIntervalMs: 50 });
  onTestFinished(() => relay.stop());
}

/**
 * Run record_payment once (committed, then a crash before finish), wait for
 * its delivery, `retryFrom` it (with `resendOutbox` when asked), finish the
 * run, and wait until both committed rows are delivered.
 */
async function deliverTwice(tenant: string, resendOutbox = false): Promise<void> {
  setFaultHook(engine, (point) => {
    if (point === "after:phase:record_payment") throw new CrashSignal(point);
  });
  await engine.runOnce(paid, { tenantId: tenant, key: "o-1", input: {} }).catch((e) => {
    if (!(e instanceof CrashSignal)) throw e;
  });
  setFaultHook(engine, undefined);
  await engine.release(tenant, "o-1");
  await delivered(tenant, 1);
  await engine.retryFrom(tenant, "o-1", "record_payment", { resendOutbox });
  expect(await engine.runOnce(paid, { tenantId: tenant, key: "o-1", input: {} })).toMatchObject({ status: 201 });
  await delivered(tenant, 2);
}

const delivered = (tenant: string, rows: number) =>
  until(`${rows} rows delivered`, async () => {
    const all = await outboxRows(t.db, tenant);
    return all.length === rows && all.every((r) => r.status === "delivered");
  });

describe("webhook: a receiver deduplicating on Idempotency-Key", () => {
  async function receiver(tenant: string) {
    const r = await startReceiver(t.db, tenant, SECRET, () => ({ kind: "ok" }));
    onTestFinished(() => r.close());
    relayWith(createWebhookSender({ url: r.url, secret: SECRET }));
    return r;
  }

  it("retryFrom: both committed runs of the phase arrive under one key, applied once", async () => {
    const tenant = `dkw-${uid()}`;
    const r = await receiver(tenant);
    await deliverTwice(tenant);
    expect(r.arrivals).toHaveLength(2);
    expect(new Set(r.arrivals.map((a) => a.key)).size).toBe(1);
    expect(await receivedCount(t.db, tenant)).toBe(1);
  });

  it("retryFrom with resendOutbox: a new key, so the receiver applies the message again", async () => {
    const tenant = `dkw-${uid()}`;
    const r = await receiver(tenant);
    await deliverTwice(tenant, true);
    expect(new Set(r.arrivals.map((a) => a.key)).size).toBe(2);
    expect(await receivedCount(t.db, tenant)).toBe(2);
  });
});

describe.skipIf(!rabbit)("RabbitMQ: a consumer deduplicating on message_id", () => {
  it("retryFrom: two publishes with one message_id, applied once", async () => {
    const tenant = `dka-${uid()}`;
    const queue = `idempo-test-${uid()}`;
    const admin = await amqpConnect(RABBIT_URL);
    const channel = await admin.createChannel();
    await channel.assertQueue(queue, { durable: true });
    const consumer = await consumeQueue(RABBIT_URL, queue, t.db);
    onTestFinished(async () => {
      await consumer.close();
      await channel.deleteQueue(queue).catch(() => undefined);
      await admin.close();
    });
    const publisher = createAmqpPublisher({ url: RABBIT_URL, route: () => ({ exchange: "", routingKey: queue }) });
    onTestFinished(() => publisher.close());
    relayWith(publisher.deliver);
    await deliverTwice(tenant);
    await until("both publishes consumed", () => consumer.arrivals.length === 2);
    expect(new Set(consumer.arrivals).size).toBe(1);
    await until("the arrival applied", async () => (await receivedCount(t.db, queue)) === 1);
  });
});

describe.skipIf(!nats)("JetStream: the duplicate window and a consumer deduplicating on Nats-Msg-Id", () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const streams: string[] = [];
  beforeAll(async () => {
    nc = await connect({ servers: NATS_SERVER });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    for (const s of streams) await jsm.streams.delete(s).catch(() => undefined);
    await nc?.close();
  });

  it("retryFrom: the second publish is a duplicate; the stream holds the message once, applied once", async () => {
    const tenant = `dkn-${uid()}`;
    const s = await createStream(jsm);
    streams.push(s.name);
    relayWith(createJetStreamPublisher({ connection: nc, subject: () => s.subject }).deliver);
    await deliverTwice(tenant);
    const stored = await readStream(nc, s.name);
    for (const m of stored) await applyOnce(t.db, m.msgId, s.name);
    expect(stored).toHaveLength(1);
    expect(await receivedCount(t.db, s.name)).toBe(1);
  });
});
