/**
 * The outbox to RabbitMQ, with the relay killed mid-publish.
 *
 * Five checkouts each enqueue a receipt in their receipt phase. A relay in
 * a child process publishes them with publisher confirms. After the broker
 * has confirmed the third one, and before the relay could mark it
 * delivered, the demo SIGKILLs the relay. A new relay takes the unmarked
 * messages over once the dead relay's claim runs out and publishes them
 * again, with the same delivery key as `message_id`: the broker now holds a
 * second copy of what was confirmed before the kill. The consumer inserts
 * each receipt with `ON CONFLICT (order_id) DO NOTHING`, so each order
 * still gets exactly one receipt.
 *
 * Needs PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres;
 * a scratch database is created and dropped) and RabbitMQ (AMQP_URL, default
 * amqp://guest:guest@127.0.0.1:5672; a scratch queue is declared and deleted).
 *
 *   pnpm start:rabbitmq
 */
import { fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { createAmqpPublisher } from "@idempo/relays/amqp";
import { connect } from "amqplib";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { printChecks } from "../report.js";
import type { Database } from "./checkout.js";
import { checkout, createTables, RECEIPT_TOPIC, TENANT } from "./checkout.js";
import { consumeReceipts } from "./receipts-consumer.js";
import type { RelayProcessConfig } from "./relay-process.js";

const SERVER_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const AMQP_URL = process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const ORDERS = 5;
/** The confirm after which the first relay stops short of marking (and is killed). */
const HOLD_AFTER = 3;
/** The first relay's claim: the second relay takes its messages over once it runs out. */
const CHILD_LEASE_MS = 1_500;

const say = (text: string) => console.log(`   ${text}`);
const heading = (n: number, text: string) => console.log(`\n${n}. ${text}`);

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function outboxCounts(db: Kysely<Database>): Promise<{ delivered: number; pending: number }> {
  const { rows } = await sql<{ status: string; n: number }>`
    SELECT status, count(*)::int AS n FROM idempo.outbox GROUP BY status`.execute(db);
  const of = (s: string) => rows.find((r) => r.status === s)?.n ?? 0;
  return { delivered: of("delivered"), pending: of("pending") };
}

/** Run the relay process until the broker confirmed HOLD_AFTER messages, then SIGKILL it; returns the held keys. */
function killRelayMidPublish(config: RelayProcessConfig): Promise<string[]> {
  const child = fork(fileURLToPath(new URL("./relay-process.ts", import.meta.url)), [JSON.stringify(config)], {
    execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const confirmed: string[] = [];
  return new Promise((resolve, reject) => {
    child.on("message", (m: { confirmed: string }) => {
      confirmed.push(m.confirmed);
      say(`relay: broker confirmed ${m.confirmed.slice(0, 16)}...`);
      if (confirmed.length === HOLD_AFTER) child.kill("SIGKILL");
    });
    child.once("close", (_code, signal) =>
      signal === "SIGKILL" ? resolve(confirmed.slice(HOLD_AFTER - 1)) : reject(new Error("the relay ended on its own")),
    );
  });
}

async function story(db: Kysely<Database>, databaseUrl: string, engine: Engine, queue: string): Promise<boolean> {
  const admin = await connect(AMQP_URL);
  try {
    const channel = await admin.createChannel();
    await channel.assertQueue(queue, { durable: true });
    const tally = await consumeReceipts(channel, queue, db);

    heading(1, `${ORDERS} checkouts; each receipt phase enqueues a '${RECEIPT_TOPIC}' message`);
    for (let i = 1; i <= ORDERS; i++) {
      const orderId = `o-${1000 + i}`;
      await engine.runOnce(checkout, {
        tenantId: TENANT,
        key: `checkout-${orderId}`,
        input: { orderId, amountCents: 1000 * i },
      });
    }
    say(`outbox: ${(await outboxCounts(db)).pending} receipts pending`);

    heading(
      2,
      `A relay process publishes with publisher confirms; it is SIGKILLed after confirm #${HOLD_AFTER}, before marking it`,
    );
    const held = await killRelayMidPublish({
      databaseUrl,
      amqpUrl: AMQP_URL,
      queue,
      holdAfter: HOLD_AFTER,
      leaseMs: CHILD_LEASE_MS,
    });
    const afterKill = await outboxCounts(db);
    say(`relay killed. outbox: ${afterKill.delivered} delivered, ${afterKill.pending} pending`);
    say(`pending but already on the broker (confirmed, never marked): ${held.length}`);

    heading(3, "A new relay takes the unmarked messages over once the dead relay's claim has run out");
    const amqp = createAmqpPublisher({ url: AMQP_URL, route: () => ({ exchange: "", routingKey: queue }) });
    const relay = engine.startRelay({ handlers: { [RECEIPT_TOPIC]: amqp.deliver }, pollIntervalMs: 100 });
    try {
      await until("every receipt delivered", async () => (await outboxCounts(db)).delivered === ORDERS);
      const expectedArrivals = ORDERS + held.length;
      await until(
        "the consumer has handled every copy",
        () => tally.arrivals >= expectedArrivals && tally.receiptsSent + tally.copiesRefused === tally.arrivals,
      );
    } finally {
      await relay.stop();
      await amqp.close();
    }
    say(`every receipt marked delivered; the consumer saw ${tally.arrivals} messages for ${ORDERS} orders`);
    say(`copies refused by UNIQUE (order_id): ${tally.copiesRefused}`);

    const receipts = await db.selectFrom("receipts").select(["order_id", "message_id"]).orderBy("order_id").execute();
    console.log("\nReceipts:");
    for (const r of receipts) say(`${r.order_id}  from message ${r.message_id.slice(0, 20)}...`);
    const orders = await db.selectFrom("orders").select("id").execute();
    const withReceipt = new Set(receipts.map((r) => r.order_id));
    return printChecks(
      [
        { what: "orders checked out", expected: ORDERS, actual: orders.length },
        {
          what: "receipts marked delivered in the outbox",
          expected: ORDERS,
          actual: (await outboxCounts(db)).delivered,
        },
        { what: "receipts sent (rows in receipts)", expected: ORDERS, actual: receipts.length },
        { what: "orders without a receipt", expected: 0, actual: orders.filter((o) => !withReceipt.has(o.id)).length },
        { what: "arrivals minus copies refused", expected: ORDERS, actual: tally.arrivals - tally.copiesRefused },
        {
          what: "a confirmed copy came again and was refused (1 = yes)",
          expected: 1,
          actual: tally.copiesRefused >= 1 ? 1 : 0,
        },
      ],
      `one receipt per order, although the relay was killed mid-publish and the consumer saw ${tally.arrivals} messages.`,
    );
  } finally {
    const cleanup = await admin.createChannel();
    await cleanup.deleteQueue(queue).catch(() => undefined);
    await admin.close();
  }
}

async function main(): Promise<boolean> {
  const name = `idempo_example_rmq_${randomUUID().slice(0, 8)}`;
  const server = new pg.Client({ connectionString: SERVER_URL });
  await server.connect();
  await server.query(`CREATE DATABASE ${name}`);
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.href });
  // pool.end() resolves before its sockets close; the DROP ... WITH (FORCE) below may end one still closing.
  pool.on("error", () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    const engine = createEngine({ db });
    await engine.migrate();
    await createTables(db);
    console.log("idempo outbox to RabbitMQ: publisher confirms, a relay killed mid-publish, one receipt per order");
    console.log(`PostgreSQL scratch database ${name}; RabbitMQ ${new URL(AMQP_URL).host}`);
    return await story(db, url.href, engine, `idempo-example-receipts-${randomUUID().slice(0, 8)}`);
  } finally {
    await db.destroy();
    await server.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await server.end();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error("\nEXAMPLE FAILED:", error instanceof Error ? error.message : error);
  console.error("(it needs PostgreSQL at DATABASE_URL and RabbitMQ at AMQP_URL; see the README)");
  process.exitCode = 1;
}
