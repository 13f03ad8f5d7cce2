/**
 * The outbox relay: claims due messages, delivers each outside any
 * transaction, and marks it delivered; failures back off (exponential, full
 * jitter) up to `maxAttempts`, then the message is dead-lettered with its
 * last error. Delivery is at least once: a relay that dies after the handler
 * succeeded but before marking the row redelivers it, with the same
 * delivery key, once its claim expires.
 */
import { ListenConnectionLostError } from "../../database-errors.js";
import { InvalidOptionError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import { RELAY_OPTIONS } from "../../options/known-options.js";
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions, describeValue } from "../../options/option-shape.js";
import type { ClaimedMessage } from "../../store/outbox.js";
import { claimDue, markDelivered, markFailed, OUTBOX_CHANNEL } from "../../store/outbox.js";
import type { Executor, Tables } from "../../store/run-store.js";
import type { Telemetry } from "../../telemetry/telemetry.js";
import { keyHash } from "../../telemetry/telemetry.js";
import { LoopErrors } from "../entry-errors.js";
import { CrashSignal } from "../execution/control-flow.js";
import type { FaultHook } from "../execution/hooks.js";
import type { ListenCheckOptions } from "./listen-options.js";
import { listenChecks } from "./listen-options.js";
import type { NotificationSource } from "./notifications.js";
import { PollingLoop } from "./polling-loop.js";

/** One outbox message as a handler sees it. */
export interface OutboxMessage {
  readonly messageId: string;
  readonly tenantId: string;
  /** The idempotency key of the run that enqueued it. */
  readonly key: string;
  readonly topic: string;
  readonly payload: JsonValue;
  readonly createdAt: Date;
}

/** Delivery details passed with each message. */
export interface DeliveryContext {
  /** Stable across redeliveries: give it to the receiver so it can deduplicate. */
  readonly deliveryKey: string;
  /** 1 for the first delivery attempt, +1 for each retry. */
  readonly attempt: number;
  /** Aborted when the relay's claim on the message runs out or the relay stops. */
  readonly signal: AbortSignal;
}

/** Delivers one message; throw to retry it later. */
export type DeliveryHandler = (message: OutboxMessage, ctx: DeliveryContext) => Promise<void> | void;

/** Options of `engine.startRelay`. */
export interface RelayOptions extends ListenCheckOptions {
  /** A handler per topic; messages of other topics are left for other relays. */
  handlers: Readonly<Record<string, DeliveryHandler>>;
  /** Messages delivered at once (Default: 4). */
  concurrency?: number;
  /** Attempts before a message is dead-lettered (Default: 10). */
  maxAttempts?: number;
  /** First retry delay in ms, doubling per attempt with full jitter (Default: 1 000). */
  backoffMs?: number;
  /** Largest retry delay in ms (Default: 300 000). */
  maxBackoffMs?: number;
  /** How long a relay holds a claimed message, in ms; longer than any handler should take (Default: 60 000). */
  leaseMs?: number;
  /** Polling interval in ms when nothing wakes the relay (Default: 5 000). */
  pollIntervalMs?: number;
  /**
   * Wake on NOTIFY instead of waiting for the next poll (Default: poll
   * only). Give a `pg.Pool` of its own (`max: 1`) to get wake-ups back
   * after a lost connection: the relay checks out one client for LISTEN,
   * checks it every `listenCheckMs`, and when it fails, ends or stops
   * answering within `answerTimeoutMs`, tells `onError` once (a
   * `ListenConnectionLostError`), releases it destroyed, polls, and checks
   * out a new one on a later check; the recovery is logged. A dedicated,
   * connected `pg.Client` is checked the same way but cannot reconnect:
   * once it is lost, polling every `pollIntervalMs` delivers from then on.
   * A PGlite instance also fits.
   */
  listen?: NotificationSource;
  /**
   * Called with delivery and database errors; the relay goes on (Default:
   * ignore). A schema that was never migrated is reported once per outage,
   * as the `WorkflowUsageError` that names `engine.migrate()`.
   */
  onError?: (error: unknown) => void;
}

/** A running relay. */
export interface Relay {
  /**
   * Stop claiming, wait for deliveries in progress (each at most `leaseMs`),
   * and stop listening. Returns within about `answerTimeoutMs` plus
   * `leaseMs` whatever the connections do: a poll in progress that gets no
   * answer in `answerTimeoutMs` is abandoned (messages it claims are not
   * delivered by this relay; their claim runs out and another relay takes
   * them), and so is an UNLISTEN.
   */
  stop(): Promise<void>;
}

export function startRelay(
  db: Executor,
  tables: Tables,
  hook: () => FaultHook | undefined,
  telemetry: Telemetry,
  options: RelayOptions,
): Relay {
  const at = "startRelay";
  checkOptions(at, RELAY_OPTIONS, options);
  const topics = Object.keys(options.handlers);
  for (const topic of topics) {
    const handler = options.handlers[topic];
    if (typeof handler !== "function") {
      throw new InvalidOptionError(
        `handlers.${topic}`,
        `${at}: handlers.${topic} must be a function of (message, { deliveryKey, attempt, signal }), got ${describeValue(handler)}`,
      );
    }
  }
  const concurrency = intOption(at, "concurrency", options.concurrency, 1, 1_000, 4);
  const maxAttempts = intOption(at, "maxAttempts", options.maxAttempts, 1, 10_000, 10);
  const backoffMs = intOption(at, "backoffMs", options.backoffMs, 0, MAX_TIMER_MS, 1_000);
  const maxBackoffMs = intOption(at, "maxBackoffMs", options.maxBackoffMs, 0, MAX_TIMER_MS, 300_000);
  const leaseMs = intOption(at, "leaseMs", options.leaseMs, 1, MAX_TIMER_MS, 60_000);
  const pollIntervalMs = intOption(at, "pollIntervalMs", options.pollIntervalMs, 1, MAX_TIMER_MS, 5_000);
  const onError = options.onError ?? (() => {});
  const errors = new LoopErrors(tables.schema, at, onError);
  const loop = new PollingLoop({
    concurrency,
    pollMs: pollIntervalMs,
    listen: options.listen,
    ...listenChecks(at, options),
    at,
    channel: OUTBOX_CHANNEL,
    listener: "outbox relay",
    onError: (error) => {
      if (error instanceof ListenConnectionLostError) {
        telemetry.log("warn", { error: error.message }, "idempo: outbox relay lost its LISTEN connection");
      }
      onError(error);
    },
    onListenBack: () => telemetry.log("info", {}, "idempo: outbox relay LISTEN re-established; NOTIFY wakes it again"),
  });

  async function deliver(m: ClaimedMessage): Promise<void> {
    const handler = options.handlers[m.topic];
    if (!handler) return;
    const attributes = () => ({
      "messaging.destination.name": m.topic,
      "messaging.message.id": m.message_id,
      "idempo.tenant_id": m.tenant_id,
      "idempo.key.hash": keyHash(m.tenant_id, m.key),
      "idempo.outbox.attempt": m.attempts,
    });
    await telemetry
      .span(`deliver ${m.topic}`, "producer", attributes, () => attemptDelivery(m, handler))
      .catch(() => undefined); // the failure is recorded on the span and handled below
  }

  async function attemptDelivery(m: ClaimedMessage, handler: DeliveryHandler): Promise<void> {
    const abort = AbortSignal.any([loop.stopping, AbortSignal.timeout(leaseMs)]);
    try {
      await handler(
        {
          messageId: m.message_id,
          tenantId: m.tenant_id,
          key: m.key,
          topic: m.topic,
          payload: JSON.parse(m.payload) as JsonValue,
          createdAt: m.created_at,
        },
        { deliveryKey: m.delivery_key, attempt: m.attempts, signal: abort },
      );
      await hook()?.(`delivered:outbox:${m.topic}`, { tenantId: m.tenant_id, key: m.key, attempt: m.attempts });
      await markDelivered(db, tables, m);
      // The application's clock against the commit's: a gauge of lag, not a lease.
      telemetry.duration("outboxLag", Date.now() - m.created_at.getTime(), { "messaging.destination.name": m.topic });
    } catch (error) {
      if (error instanceof CrashSignal) return; // as if the relay died here: the claim simply runs out
      onError(error);
      const delay = Math.random() * Math.min(maxBackoffMs, backoffMs * 2 ** (m.attempts - 1));
      const message = error instanceof Error ? error.message : String(error);
      const dead = m.attempts >= maxAttempts;
      const fields = {
        topic: m.topic,
        messageId: m.message_id,
        tenantId: m.tenant_id,
        attempt: m.attempts,
        error: message,
      };
      if (dead) {
        telemetry.count("deadLetters", { "messaging.destination.name": m.topic });
        telemetry.log("error", fields, "idempo: outbox delivery failed for the last time; message dead-lettered");
      } else {
        telemetry.log(
          "warn",
          { ...fields, retryInMs: Math.round(delay) },
          "idempo: outbox delivery failed; will retry",
        );
      }
      await markFailed(db, tables, m, message, dead, delay).catch((e: unknown) => errors.report(e));
      throw error;
    }
  }

  // A slot frees when its delivery ends or its claim runs out, whichever is
  // first: a handler that hangs and ignores its signal cannot stall the relay
  // (its message is claimable again once the claim expires).
  const occupy = (m: ClaimedMessage) => {
    let expiry: NodeJS.Timeout | undefined;
    loop.occupy(() =>
      Promise.race([
        deliver(m),
        new Promise<void>((resolve) => {
          expiry = setTimeout(resolve, leaseMs);
          expiry.unref();
        }),
      ]).finally(() => clearTimeout(expiry)),
    );
  };

  loop.start(async (free) => {
    let batch: ClaimedMessage[] = [];
    try {
      batch = await claimDue(db, tables, topics, free, leaseMs);
      errors.ok();
    } catch (error) {
      errors.report(error);
    }
    for (const m of batch) occupy(m);
    return { started: batch.length, pauseMs: pollIntervalMs };
  });
  return loop;
}
