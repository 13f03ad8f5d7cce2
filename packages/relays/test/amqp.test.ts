/**
 * The RabbitMQ publisher against the real broker: confirms decide what is
 * marked delivered, the delivery key travels as `message_id`, and neither a
 * killed relay nor a dropped connection loses or double-applies a message
 * for a consumer that deduplicates on it.
 */
import { randomUUID } from "node:crypto";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import type { ConfirmChannel } from "amqplib";
import { connect } from "amqplib";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createAmqpPublisher, DeliveryNotConfirmedError, RelayOptionsError } from "../src/amqp/index.ts";
import { setFaultHook } from "../src/faults.ts";
import type { AmqpConsumer } from "./support/amqp-consumer.ts";
import { consumeQueue } from "./support/amqp-consumer.ts";
import { brokerUp, NATS_SERVER, RABBIT_URL, run } from "./support/brokers.ts";
import { outboxRows, receivedCount, useRelayDatabase } from "./support/database.ts";
import { killRelayAtHold } from "./support/relay-child.ts";
import { commitOrders, TOPIC, until } from "./support/workload.ts";

const up = await brokerUp("RabbitMQ", "127.0.0.1", 5672);
// Dropping a connection needs the broker's own CLI, on this machine and allowed to talk to the node.
const ctl =
  up &&
  (await run("rabbitmqctl", ["-q", "list_vhosts"]).then(
    () => true,
    () => false,
  ));
if (up && !ctl)
  console.warn("\n!!! RabbitMQ dropped-connection test SKIPPED: rabbitmqctl is missing or cannot reach the node.\n");
const t = useRelayDatabase();
const uid = () => randomUUID().slice(0, 8);

describe.skipIf(!up)("RabbitMQ publisher", () => {
  let admin: Awaited<ReturnType<typeof connect>>;
  let adminChannel: ConfirmChannel;
  const queues: string[] = [];
  let engine: Engine;

  beforeAll(async () => {
    admin = await connect(RABBIT_URL);
    adminChannel = await admin.createConfirmChannel();
    engine = createEngine({ db: t.db });
  });
  afterAll(async () => {
    setFaultHook(undefined);
    for (const q of queues) await adminChannel.deleteQueue(q).catch(() => undefined);
    await admin?.close();
  });

  async function durableQueue(args: Record<string, unknown> = {}): Promise<string> {
    const name = `idempo-test-${uid()}`;
    queues.push(name);
    await adminChannel.assertQueue(name, { durable: true, arguments: args });
    return name;
  }

  function startRelay(deliver: ReturnType<typeof createAmqpPublisher>["deliver"], extra = {}) {
    const relay = engine.startRelay({
      handlers: { [TOPIC]: deliver },
      concurrency: 4,
      pollIntervalMs: 100,
      backoffMs: 20,
      maxBackoffMs: 200,
      ...extra,
    });
    onTestFinished(() => relay.stop());
    return relay;
  }

  function publisherTo(queue: string, extra: Partial<Parameters<typeof createAmqpPublisher>[0]> = {}) {
    const publisher = createAmqpPublisher({
      url: RABBIT_URL,
      route: () => ({ exchange: "", routingKey: queue }),
      reconnectDelayMs: 50,
      maxReconnectDelayMs: 500,
      ...extra,
    });
    onTestFinished(() => publisher.close());
    return publisher;
  }

  /** Every committed message arrived, each exactly once through the effect table, and every delivered row was consumed. */
  async function expectEachAppliedOnce(tenant: string, consumer: AmqpConsumer, queue: string, count: number) {
    await until("every row delivered", async () =>
      (await outboxRows(t.db, tenant)).every((r) => r.status === "delivered"),
    );
    const rows = await outboxRows(t.db, tenant);
    expect(rows).toHaveLength(count);
    await until("every delivered message consumed", () => rows.every((r) => consumer.count(r.deliveryKey) >= 1));
    await until("every arrival applied", async () => (await receivedCount(t.db, queue)) === count);
    expect(new Set(consumer.arrivals)).toEqual(new Set(rows.map((r) => r.deliveryKey)));
    return rows;
  }

  it("publishes each message persistent, with the delivery key as message_id, and marks it delivered after the confirm", async () => {
    const tenant = `a1-${uid()}`;
    const queue = await durableQueue();
    await commitOrders(engine, tenant, 6);
    const seen: { id: unknown; mode: unknown; type: unknown; tenant: unknown; body: string }[] = [];
    await adminChannel.consume(queue, (msg) => {
      if (!msg) return;
      seen.push({
        id: msg.properties.messageId,
        mode: msg.properties.deliveryMode,
        type: msg.properties.type,
        tenant: msg.properties.headers?.["x-idempo-tenant"],
        body: msg.content.toString(),
      });
      adminChannel.ack(msg);
    });
    startRelay(publisherTo(queue).deliver);
    await until("six arrivals", () => seen.length === 6);
    const rows = await outboxRows(t.db, tenant);
    await until("rows delivered", async () => (await outboxRows(t.db, tenant)).every((r) => r.status === "delivered"));
    expect(new Set(seen.map((s) => s.id))).toEqual(new Set(rows.map((r) => r.deliveryKey)));
    for (const s of seen) {
      expect(s).toMatchObject({ mode: 2, type: TOPIC, tenant });
      expect(JSON.parse(s.body)).toMatchObject({ orderId: expect.stringMatching(/^o-/) });
    }
  });

  it("a message the broker nacks is never marked delivered (a full queue that rejects publishes)", async () => {
    const tenant = `a2-${uid()}`;
    const queue = await durableQueue({ "x-max-length": 1, "x-overflow": "reject-publish" });
    await commitOrders(engine, tenant, 3);
    const errors: unknown[] = [];
    startRelay(publisherTo(queue).deliver, { maxAttempts: 2, onError: (e: unknown) => errors.push(e) });
    await until("no row pending", async () => (await outboxRows(t.db, tenant)).every((r) => r.status !== "pending"));
    const rows = await outboxRows(t.db, tenant);
    expect(rows.filter((r) => r.status === "delivered")).toHaveLength(1);
    expect(rows.filter((r) => r.status === "dead")).toHaveLength(2);
    for (const r of rows.filter((r) => r.status === "dead"))
      expect(r.lastError).toMatch(/refused the message \(nack\)/);
    expect((await adminChannel.checkQueue(queue)).messageCount).toBe(1);
    expect(errors.some((e) => e instanceof DeliveryNotConfirmedError && e.reason === "nacked")).toBe(true);
  });

  it("a message no queue is bound for comes back (mandatory) and is never marked delivered", async () => {
    const tenant = `a3-${uid()}`;
    const exchange = `idempo-test-x-${uid()}`;
    await adminChannel.assertExchange(exchange, "direct", { durable: false, autoDelete: false });
    onTestFinished(async () => {
      await adminChannel.deleteExchange(exchange);
    });
    await commitOrders(engine, tenant, 1);
    const publisher = createAmqpPublisher({ url: RABBIT_URL, route: () => ({ exchange, routingKey: "nowhere" }) });
    onTestFinished(() => publisher.close());
    startRelay(publisher.deliver, { maxAttempts: 2 });
    await until("row dead", async () => (await outboxRows(t.db, tenant))[0]?.status === "dead");
    expect((await outboxRows(t.db, tenant))[0]?.lastError).toMatch(/could not route the message/);
  });

  it("a channel error (an exchange that does not exist) closes the channel; the publisher reopens it and delivers everything", async () => {
    const tenant = `a4-${uid()}`;
    const queue = await durableQueue();
    await commitOrders(engine, tenant, 12);
    const consumer = await consumeQueue(RABBIT_URL, queue, t.db);
    onTestFinished(() => consumer.close());
    let setups = 0;
    let wrongRoutes = 2;
    const publisher = publisherTo(queue, {
      setup: async () => {
        setups++;
      },
      route: () =>
        wrongRoutes-- > 0 ? { exchange: `missing-${uid()}`, routingKey: queue } : { exchange: "", routingKey: queue },
    });
    startRelay(publisher.deliver);
    await expectEachAppliedOnce(tenant, consumer, queue, 12);
    expect(setups).toBeGreaterThanOrEqual(2);
  });

  it("a broker that cannot be reached keeps the publisher retrying its connect; each delivery gives up at its signal and stays undelivered", async () => {
    const tenant = `a7-${uid()}`;
    await commitOrders(engine, tenant, 1);
    let connectErrors = 0;
    const publisher = createAmqpPublisher({
      url: "amqp://guest:guest@127.0.0.1:1", // nothing listens on port 1
      route: () => ({ exchange: "", routingKey: "x" }),
      reconnectDelayMs: 20,
      maxReconnectDelayMs: 100,
      onError: () => connectErrors++,
    });
    onTestFinished(() => publisher.close());
    startRelay(publisher.deliver, { maxAttempts: 2, leaseMs: 1_000 });
    await until("row dead", async () => (await outboxRows(t.db, tenant))[0]?.status === "dead");
    expect((await outboxRows(t.db, tenant))[0]?.lastError).toMatch(/gave up waiting for a connection to RabbitMQ/);
    expect(connectErrors).toBeGreaterThanOrEqual(2);
  });

  it.skipIf(!ctl)(
    "dropped connections (rabbitmqctl close_connection) lose nothing and apply each message once",
    async () => {
      const tenant = `a5-${uid()}`;
      const queue = await durableQueue();
      const connectionName = `idempo-relay-${uid()}`;
      await commitOrders(engine, tenant, 30);
      const consumer = await consumeQueue(RABBIT_URL, queue, t.db);
      onTestFinished(() => consumer.close());
      let setups = 0;
      const publisher = publisherTo(queue, {
        socketOptions: { clientProperties: { connection_name: connectionName } },
        setup: async () => {
          setups++;
        },
      });
      // Drop the publisher's connection at its 8th and 20th publish, while that
      // publish (and others in the batch) still wait for their confirm.
      // Publishes that arrive during a drop wait for it, so the second drop hits the new connection.
      let published = 0;
      let dropping: Promise<void> = Promise.resolve();
      setFaultHook(async (point) => {
        if (point !== "amqp:published") return;
        published++;
        if (published === 8 || published === 20) dropping = closeConnectionsNamed(connectionName);
        await dropping;
      });
      onTestFinished(() => setFaultHook(undefined));
      startRelay(publisher.deliver);
      await expectEachAppliedOnce(tenant, consumer, queue, 30);
      expect(setups).toBeGreaterThanOrEqual(3);
    },
  );

  it("refuses a missing route, and a closed publisher fails its deliveries (they stay pending for the relay)", async () => {
    expect(() => createAmqpPublisher({ url: RABBIT_URL } as Parameters<typeof createAmqpPublisher>[0])).toThrow(
      RelayOptionsError,
    );
    const publisher = createAmqpPublisher({ url: RABBIT_URL, route: () => ({ exchange: "", routingKey: "x" }) });
    await publisher.close();
    const message = { messageId: "m", tenantId: "t", key: "k", topic: TOPIC, payload: {}, createdAt: new Date() };
    const ctx = { deliveryKey: "dlv_x", attempt: 1, signal: new AbortController().signal };
    await expect(publisher.deliver(message, ctx)).rejects.toMatchObject({
      code: "delivery_not_confirmed",
      reason: "closed",
    });
  });

  for (const stopAt of ["amqp:published", "amqp:confirmed"] as const) {
    it(`a relay SIGKILLed at ${stopAt} leaves its held messages undelivered; a new relay delivers them, and the consumer applies each once`, async () => {
      const tenant = `a6-${uid()}`;
      const queue = await durableQueue();
      await commitOrders(engine, tenant, 16);
      const consumer = await consumeQueue(RABBIT_URL, queue, t.db);
      onTestFinished(() => consumer.close());
      const held = await killRelayAtHold({
        broker: "amqp",
        databaseUrl: t.url,
        amqpUrl: RABBIT_URL,
        natsServer: NATS_SERVER,
        topic: TOPIC,
        target: queue,
        stopAt,
        passFirst: 5,
        leaseMs: 1_500,
      });
      expect(held.length).toBeGreaterThanOrEqual(1);
      // Nothing the dead relay held was marked delivered: it never saw the confirm, or never reported it.
      const afterKill = await outboxRows(t.db, tenant);
      for (const key of held) expect(afterKill.find((r) => r.deliveryKey === key)?.status).toBe("pending");
      // Every row the dead relay did mark delivered is on the broker.
      const deliveredByChild = afterKill.filter((r) => r.status === "delivered").map((r) => r.deliveryKey);
      await until("the dead relay's deliveries consumed", () => deliveredByChild.every((k) => consumer.count(k) >= 1));

      startRelay(publisherTo(queue).deliver, { leaseMs: 30_000 });
      await expectEachAppliedOnce(tenant, consumer, queue, 16);
      if (stopAt === "amqp:confirmed") {
        // The broker confirmed these before the kill, so the redelivery is a real second copy.
        for (const key of held) expect(consumer.count(key)).toBeGreaterThanOrEqual(2);
      }
    });
  }
});

/** Close the broker's connections that carry this client-provided name, as an operator (or a failing network) would. */
async function closeConnectionsNamed(name: string): Promise<void> {
  const { stdout } = await run("rabbitmqctl", [
    "list_connections",
    "-q",
    "--no-table-headers",
    "pid",
    "client_properties",
  ]);
  const pids = stdout
    .split("\n")
    .filter((line) => line.includes(`{"connection_name","${name}"}`))
    .map((line) => line.split("\t")[0] as string);
  if (pids.length === 0) throw new Error(`no RabbitMQ connection named ${name}`);
  for (const pid of pids) await run("rabbitmqctl", ["close_connection", pid, "idempo test: dropped connection"]);
}
