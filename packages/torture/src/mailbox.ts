import type { DeliveryContext, DeliveryHandler, OutboxMessage } from "@idempo/core";
import type pg from "pg";
import { TOPICS } from "./workflows/catalogue.ts";

/**
 * The receiving end of every outbox topic (mailer, webhook endpoint): it
 * logs each delivery, repeats included, so the suite can check that every
 * message arrived at least once and always under one delivery key.
 */
export function mailboxHandlers(pool: pg.Pool): Record<string, DeliveryHandler> {
  const deliver = async (message: OutboxMessage, ctx: DeliveryContext): Promise<void> => {
    await pool.query(
      `INSERT INTO mailbox.deliveries (message_id, delivery_key, tenant_id, intent_key, topic, attempt)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [message.messageId, ctx.deliveryKey, message.tenantId, message.key, message.topic, ctx.attempt],
    );
  };
  return Object.fromEntries(TOPICS.map((topic) => [topic, deliver]));
}
