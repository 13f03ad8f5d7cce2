/**
 * The relay handler that publishes outbox messages to RabbitMQ and reports
 * success only once the broker confirmed them (publisher confirms).
 */
import type { DeliveryHandler, OutboxMessage } from "@idempo/core";
import type { ConfirmChannel, Message, Options, SocketOptions } from "amqplib";
import { untilAborted } from "../abort.js";
import { DeliveryNotConfirmedError, RelayOptionsError } from "../errors.js";
import { fault } from "../faults.js";
import { ReconnectingChannel } from "./connection.js";

/** The header that carries the outbox message id: what a return is matched on. */
const MESSAGE_ID_HEADER = "x-idempo-message-id";

/** Where one message goes: an exchange (`""` is the default exchange) and a routing key. */
export interface AmqpRoute {
  readonly exchange: string;
  readonly routingKey: string;
}

/** Options of {@link createAmqpPublisher}. */
export interface AmqpPublisherOptions {
  /** The broker, as an `amqp://` URL or amqplib's connect options (user, vhost, heartbeat...). */
  url: string | Options.Connect;
  /** Socket and TLS options passed to amqplib's `connect` (Default: none). */
  socketOptions?: SocketOptions;
  /** Map a message (its topic, tenant, payload) to an exchange and a routing key. */
  route: (message: OutboxMessage) => AmqpRoute;
  /**
   * Declare the topology on each new channel: after the first connect and
   * after every reconnect (`assertExchange`, `assertQueue`, `bindQueue`).
   * Throwing counts as a failed connect and is retried (Default: none).
   */
  setup?: (channel: ConfirmChannel) => Promise<void>;
  /**
   * Publish with the `mandatory` flag, so a message that no queue is bound
   * to receive comes back (`basic.return`) and is retried instead of being
   * confirmed and dropped (Default: true).
   */
  mandatory?: boolean;
  /** First reconnect delay in ms, doubling per failed attempt, with full jitter (Default: 100). */
  reconnectDelayMs?: number;
  /** Largest reconnect delay in ms (Default: 10 000). */
  maxReconnectDelayMs?: number;
  /** Called with connection, channel and connect errors; the publisher reconnects (Default: ignore). */
  onError?: (error: unknown) => void;
}

/** A RabbitMQ publisher for `engine.startRelay`. */
export interface AmqpPublisher {
  /** The delivery handler: register it for every topic this publisher routes. */
  readonly deliver: DeliveryHandler;
  /** Close the channel and the connection; later deliveries fail (`closed`) and are retried by the relay. */
  close(): Promise<void>;
}

/**
 * Create a publisher that sends each outbox message to RabbitMQ over a
 * confirm channel, and returns from `deliver` only after the broker
 * acknowledged it, so the relay marks nothing delivered that the broker
 * does not have. Each message is published:
 *
 * - to the exchange and routing key `route(message)` returns;
 * - with `messageId` = the delivery key (stable across redeliveries: the
 *   consumer deduplicates on it), `persistent` (delivery mode 2, written to
 *   disk by durable queues), `contentType: application/json`, `type` = the
 *   topic, `timestamp` = when the phase enqueued it, and the headers
 *   `x-idempo-tenant` and `x-idempo-message-id`;
 * - with `mandatory` (unless turned off), so an unroutable message fails.
 *
 * A nack, a return, a closed channel or an aborted delivery throws a
 * `DeliveryNotConfirmedError`; the relay retries later with the same
 * delivery key. The connection is opened on the first delivery and
 * reopened with backoff whenever it or its channel closes. Close the
 * publisher after `relay.stop()`.
 *
 * @throws RelayOptionsError when `route` is missing or a route has no routing key.
 * @example
 * const amqp = createAmqpPublisher({ url: "amqp://127.0.0.1", route: (m) => ({ exchange: "orders", routingKey: m.topic }) });
 * const relay = engine.startRelay({ handlers: { "order.paid": amqp.deliver } });
 */
export function createAmqpPublisher(options: AmqpPublisherOptions): AmqpPublisher {
  if (typeof options.route !== "function") throw new RelayOptionsError("createAmqpPublisher needs a route function");
  const onError = options.onError ?? (() => {});
  const mandatory = options.mandatory ?? true;
  // Publishes awaiting their confirm, by outbox message id: a basic.return
  // names the message only by its properties, and arrives before the confirm.
  // Not by delivery key: a phase run again by retryFrom leaves a second row
  // under the same key, and the two may be published at once.
  const waiting = new Map<string, Set<{ returned: boolean }>>();
  const source = new ReconnectingChannel({
    url: options.url,
    socketOptions: options.socketOptions ?? {},
    setup: options.setup,
    initialDelayMs: options.reconnectDelayMs ?? 100,
    maxDelayMs: options.maxReconnectDelayMs ?? 10_000,
    onError,
    onReturn: (message: Message) => {
      const id = message.properties.headers?.[MESSAGE_ID_HEADER] as string | undefined;
      for (const entry of (id && waiting.get(id)) || []) entry.returned = true;
    },
  });

  const deliver: DeliveryHandler = async (message, { deliveryKey, signal }) => {
    const route = checkRoute(options.route(message), message.topic);
    const channel = await source.get(signal);
    const entry = { returned: false };
    const entries = waiting.get(message.messageId) ?? new Set();
    entries.add(entry);
    waiting.set(message.messageId, entries);
    try {
      const confirmed = new Promise<void>((resolve, reject) => {
        // publish throws at once on a channel that has just closed; that is a lost connection too.
        try {
          publish(channel, route, message, deliveryKey, mandatory, (error) =>
            error ? reject(notConfirmed(error, route)) : resolve(),
          );
        } catch (error) {
          reject(notConfirmed(error, route));
        }
      });
      confirmed.catch(() => undefined); // observed below; keeps a fault hook that never returns from an unhandled rejection
      await fault("amqp:published", deliveryKey);
      await untilAborted(confirmed, signal, "the broker's confirm");
      if (entry.returned) {
        throw new DeliveryNotConfirmedError(
          "unroutable",
          `RabbitMQ could not route the message to any queue (exchange ${JSON.stringify(route.exchange)}, routing key ${JSON.stringify(route.routingKey)}); bind a queue, or check route()`,
        );
      }
      await fault("amqp:confirmed", deliveryKey);
    } finally {
      entries.delete(entry);
      if (entries.size === 0) waiting.delete(message.messageId);
    }
  };

  return { deliver, close: () => source.close() };
}

function publish(
  channel: ConfirmChannel,
  route: AmqpRoute,
  message: OutboxMessage,
  deliveryKey: string,
  mandatory: boolean,
  done: (error: unknown) => void,
): void {
  channel.publish(
    route.exchange,
    route.routingKey,
    Buffer.from(JSON.stringify(message.payload)),
    {
      messageId: deliveryKey,
      persistent: true,
      mandatory,
      contentType: "application/json",
      type: message.topic,
      timestamp: Math.floor(message.createdAt.getTime() / 1000),
      headers: { "x-idempo-tenant": message.tenantId, [MESSAGE_ID_HEADER]: message.messageId },
    },
    done,
  );
}

function checkRoute(route: AmqpRoute | undefined, topic: string): AmqpRoute {
  if (!route || typeof route.exchange !== "string" || typeof route.routingKey !== "string") {
    throw new RelayOptionsError(`route() returned no { exchange, routingKey } for topic ${JSON.stringify(topic)}`);
  }
  return route;
}

function notConfirmed(error: unknown, route: AmqpRoute): DeliveryNotConfirmedError {
  const text = error instanceof Error ? error.message : String(error);
  // amqplib reports a nack as "message nacked"; anything else is the channel going away.
  const nacked = /nack/i.test(text);
  return new DeliveryNotConfirmedError(
    nacked ? "nacked" : "connection_lost",
    nacked
      ? `RabbitMQ refused the message (nack) on exchange ${JSON.stringify(route.exchange)}`
      : `the channel closed before RabbitMQ confirmed the message: ${text}`,
    { cause: error },
  );
}
