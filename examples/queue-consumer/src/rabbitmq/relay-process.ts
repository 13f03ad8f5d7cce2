/**
 * The outbox relay, in a process of its own so that the demo can SIGKILL
 * it. It publishes receipts to RabbitMQ through `@idempo/relays/amqp`, and
 * tells the parent each time the broker has confirmed one; from the
 * `holdAfter`-th confirm on, it stops before returning to the relay (as a
 * process frozen or killed right there would), so those messages are on the
 * broker but not yet marked delivered when the parent kills it.
 */
import type { DeliveryHandler } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { createAmqpPublisher } from "@idempo/relays/amqp";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { RECEIPT_TOPIC } from "./checkout.js";

export interface RelayProcessConfig {
  databaseUrl: string;
  amqpUrl: string;
  queue: string;
  holdAfter: number;
  leaseMs: number;
}

const config = JSON.parse(process.argv[2] ?? "{}") as RelayProcessConfig;
const db = new Kysely<unknown>({
  dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: config.databaseUrl, max: 3 }) }),
});
const engine = createEngine({ db });
const amqp = createAmqpPublisher({ url: config.amqpUrl, route: () => ({ exchange: "", routingKey: config.queue }) });

let confirmed = 0;
const deliver: DeliveryHandler = async (message, ctx) => {
  await amqp.deliver(message, ctx);
  confirmed++;
  process.send?.({ confirmed: ctx.deliveryKey });
  if (confirmed >= config.holdAfter) await new Promise(() => {}); // until the SIGKILL
};

engine.startRelay({
  handlers: { [RECEIPT_TOPIC]: deliver },
  concurrency: 2,
  leaseMs: config.leaseMs,
  pollIntervalMs: 100,
});
