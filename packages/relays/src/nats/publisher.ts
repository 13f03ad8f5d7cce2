/**
 * The relay handler that publishes outbox messages to NATS JetStream and
 * reports success only once the stream acknowledged storing them.
 */
import type { DeliveryHandler, OutboxMessage } from "@idempo/core";
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { untilAborted } from "../abort.js";
import { DeliveryNotConfirmedError, RelayOptionsError } from "../errors.js";
import { fault } from "../faults.js";

/** Options of {@link createJetStreamPublisher}. */
export interface JetStreamPublisherOptions {
  /**
   * A connection from `connect()` of `@nats-io/transport-node`. It
   * reconnects by itself; give it `maxReconnectAttempts: -1` so it never
   * gives up while the relay runs. Close it yourself after `relay.stop()`.
   */
  connection: NatsConnection;
  /** The subject for a message (Default: its topic). A stream must capture it. */
  subject?: (message: OutboxMessage) => string;
  /** Refuse to publish unless the subject is stored by this stream (Default: any stream). */
  expectStream?: string;
  /** How long to wait for the stream's acknowledgement, in ms (Default: 5 000). */
  ackTimeoutMs?: number;
}

/** A JetStream publisher for `engine.startRelay`. */
export interface JetStreamPublisher {
  /** The delivery handler: register it for every topic this publisher sends. */
  readonly deliver: DeliveryHandler;
}

/** The header JetStream deduplicates on within a stream's `duplicate_window`. */
export const MSG_ID_HEADER = "Nats-Msg-Id";

/**
 * Create a publisher that stores each outbox message in a JetStream stream
 * and returns from `deliver` only once the stream acknowledged it, so the
 * relay marks nothing delivered that JetStream has not stored. Each
 * message is published to `subject(message)` (default: the topic) with:
 *
 * - `Nats-Msg-Id` = the delivery key. A redelivery within the stream's
 *   `duplicate_window` (default 2 minutes) is dropped by JetStream and
 *   acknowledged as a duplicate, which also counts as delivered. A
 *   redelivery later than the window is stored a second time: the consumer
 *   must deduplicate on the header as well (see docs/outbox.md);
 * - the headers `Idempo-Tenant`, `Idempo-Topic` and `Idempo-Message-Id`;
 * - the payload as JSON.
 *
 * No acknowledgement in `ackTimeoutMs` (a server down or restarting, no
 * stream for the subject), an error answer, or an aborted delivery throws
 * a `DeliveryNotConfirmedError`; the relay retries with the same key.
 *
 * @throws RelayOptionsError when `connection` is missing or `ackTimeoutMs` is not positive.
 * @example
 * const nc = await connect({ servers: "127.0.0.1:4222", maxReconnectAttempts: -1 });
 * const relay = engine.startRelay({ handlers: { "order.paid": createJetStreamPublisher({ connection: nc }).deliver } });
 */
export function createJetStreamPublisher(options: JetStreamPublisherOptions): JetStreamPublisher {
  if (!options.connection) throw new RelayOptionsError("createJetStreamPublisher needs a NATS connection");
  const ackTimeoutMs = options.ackTimeoutMs ?? 5_000;
  if (!Number.isFinite(ackTimeoutMs) || ackTimeoutMs <= 0) {
    throw new RelayOptionsError(`ackTimeoutMs must be a positive number of ms, got ${String(ackTimeoutMs)}`);
  }
  const js: JetStreamClient = jetstream(options.connection);
  const subjectOf = options.subject ?? ((m: OutboxMessage) => m.topic);

  const deliver: DeliveryHandler = async (message, { deliveryKey, signal }) => {
    const subject = subjectOf(message);
    if (typeof subject !== "string" || subject.length === 0) {
      throw new RelayOptionsError(`subject() returned no subject for topic ${JSON.stringify(message.topic)}`);
    }
    const h = natsHeaders();
    h.set("Idempo-Tenant", message.tenantId);
    h.set("Idempo-Topic", message.topic);
    h.set("Idempo-Message-Id", message.messageId);
    let acked: Promise<PubAck>;
    try {
      acked = js.publish(subject, JSON.stringify(message.payload), {
        msgID: deliveryKey,
        headers: h,
        timeout: ackTimeoutMs,
        ...(options.expectStream === undefined ? {} : { expect: { streamName: options.expectStream } }),
      });
    } catch (error) {
      throw notAcked(error, subject);
    }
    acked.catch(() => undefined); // observed below; a fault hook that never returns must not leave it unhandled
    await fault("nats:published", deliveryKey);
    try {
      await untilAborted(acked, signal, "the JetStream acknowledgement");
    } catch (error) {
      if (error instanceof DeliveryNotConfirmedError) throw error;
      throw notAcked(error, subject);
    }
    await fault("nats:acked", deliveryKey);
  };

  return { deliver };
}

function notAcked(error: unknown, subject: string): DeliveryNotConfirmedError {
  const text = error instanceof Error ? error.message : String(error);
  // An API error is the server answering "no" (no stream, wrong stream); anything else is no answer at all.
  const answered = error instanceof Error && error.name === "JetStreamApiError";
  return new DeliveryNotConfirmedError(
    answered ? "rejected" : "connection_lost",
    `JetStream did not acknowledge the message on ${JSON.stringify(subject)}: ${text}`,
    { cause: error },
  );
}
