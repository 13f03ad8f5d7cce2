/** The JSON body a webhook carries. */
import type { JsonValue, OutboxMessage } from "@idempo/core";

/**
 * What a webhook POSTs: the message's payload with the facts a receiver
 * needs around it. `id` is the delivery key, the same on every redelivery
 * of the message (and also the `Idempotency-Key` header): deduplicate on it.
 */
export interface WebhookEvent {
  readonly id: string;
  readonly topic: string;
  readonly tenantId: string;
  /** When the phase enqueued the message (ISO 8601). */
  readonly createdAt: string;
  readonly payload: JsonValue;
}

export function toWebhookEvent(message: OutboxMessage, deliveryKey: string): WebhookEvent {
  return {
    id: deliveryKey,
    topic: message.topic,
    tenantId: message.tenantId,
    createdAt: message.createdAt.toISOString(),
    payload: message.payload,
  };
}
