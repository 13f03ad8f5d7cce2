import type { Channel } from "amqplib";
import type { Kysely } from "kysely";
import type { Database, ReceiptRequested } from "./checkout.js";

/** What the consumer saw. */
export interface ConsumerTally {
  arrivals: number;
  receiptsSent: number;
  copiesRefused: number;
}

/**
 * Consume receipt messages: each arrival inserts its receipt with
 * `ON CONFLICT (order_id) DO NOTHING`, and is acknowledged only after that
 * insert committed. A copy (the relay redelivered a message whose confirm it
 * never recorded) finds the row there and sends nothing.
 */
export async function consumeReceipts(channel: Channel, queue: string, db: Kysely<Database>): Promise<ConsumerTally> {
  const tally: ConsumerTally = { arrivals: 0, receiptsSent: 0, copiesRefused: 0 };
  await channel.prefetch(10);
  await channel.consume(queue, (msg) => {
    if (!msg) return;
    tally.arrivals++;
    const receipt = JSON.parse(msg.content.toString()) as ReceiptRequested;
    db.insertInto("receipts")
      .values({ order_id: receipt.orderId, message_id: String(msg.properties.messageId) })
      .onConflict((oc) => oc.column("order_id").doNothing())
      .returning("id")
      .executeTakeFirst()
      .then(
        (row) => {
          if (row) tally.receiptsSent++;
          else tally.copiesRefused++;
          channel.ack(msg);
        },
        () => channel.nack(msg, false, true),
      );
  });
  return tally;
}
