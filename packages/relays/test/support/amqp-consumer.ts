/**
 * A real RabbitMQ consumer for the tests: it records every arrival and
 * applies each message once through the `received` table (a unique
 * delivery key), acknowledging only after that insert committed.
 */
import type { Channel, ChannelModel } from "amqplib";
import { connect } from "amqplib";
import type { AnyDb } from "../../../testkit/src/index.ts";
import { applyOnce } from "./database.ts";

export interface AmqpConsumer {
  /** The `message_id` of every arrival, copies included, in order. */
  readonly arrivals: string[];
  readonly channel: Channel;
  /** Arrivals per delivery key. */
  count(deliveryKey: string): number;
  close(): Promise<void>;
}

export async function consumeQueue(url: string, queue: string, db: AnyDb): Promise<AmqpConsumer> {
  const model: ChannelModel = await connect(url);
  const channel = await model.createChannel();
  await channel.prefetch(20);
  const arrivals: string[] = [];
  await channel.consume(queue, (msg) => {
    if (!msg) return;
    const key = String(msg.properties.messageId);
    arrivals.push(key);
    applyOnce(db, key, queue).then(
      () => channel.ack(msg),
      () => channel.nack(msg, false, true),
    );
  });
  return {
    arrivals,
    channel,
    count: (key) => arrivals.filter((k) => k === key).length,
    close: () => model.close(),
  };
}
