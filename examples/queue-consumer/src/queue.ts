/**
 * An in-memory stand-in for an at-least-once broker (SQS, RabbitMQ,
 * Pub/Sub): a delivery whose acknowledgement never arrives is delivered
 * again, up to `maxDeliveries`; then the message moves to a dead-letter
 * queue, from which an operator may replay it much later.
 */

/** A published message. The broker assigns the id, and every redelivery keeps it. */
export interface Message<T> {
  readonly id: string;
  readonly body: T;
}

/** One delivery of a message. */
export interface Delivery<T> {
  readonly message: Message<T>;
  /** 1 for the first delivery, +1 for each redelivery (counting restarts after a dead-letter replay). */
  readonly deliveryCount: number;
  /** True when the message came back from the dead-letter queue. */
  readonly fromDeadLetters: boolean;
}

interface Entry<T> {
  readonly message: Message<T>;
  deliveryCount: number;
  readonly fromDeadLetters: boolean;
}

export class AtLeastOnceQueue<T> {
  readonly #maxDeliveries: number;
  readonly #ready: Entry<T>[] = [];
  readonly #unacked = new Map<string, Entry<T>>();
  readonly #deadLetters: Message<T>[] = [];
  readonly #acksToLose = new Map<string, number>();
  #published = 0;
  #deliveries = 0;

  /** @param maxDeliveries deliveries without an acknowledgement before a message is dead-lettered. */
  constructor(maxDeliveries: number) {
    this.#maxDeliveries = maxDeliveries;
  }

  /** Deliveries so far, counting redeliveries and dead-letter replays. */
  get deliveries(): number {
    return this.#deliveries;
  }

  /** Messages waiting in the dead-letter queue. */
  get deadLetters(): readonly Message<T>[] {
    return this.#deadLetters;
  }

  /** Publish a message; returns it with the id the broker gave it. */
  publish(body: T): Message<T> {
    this.#published++;
    const message = { id: `msg-${String(this.#published).padStart(4, "0")}`, body };
    this.#ready.push({ message, deliveryCount: 0, fromDeadLetters: false });
    return message;
  }

  /** Lose the next `count` acknowledgements of a message, as a consumer crash or a dropped connection would. */
  loseAcks(messageId: string, count: number): void {
    this.#acksToLose.set(messageId, count);
  }

  /** The next delivery, or `undefined` when nothing is ready. */
  receive(): Delivery<T> | undefined {
    const entry = this.#ready.shift();
    if (!entry) return undefined;
    entry.deliveryCount++;
    this.#deliveries++;
    this.#unacked.set(entry.message.id, entry);
    return { message: entry.message, deliveryCount: entry.deliveryCount, fromDeadLetters: entry.fromDeadLetters };
  }

  /**
   * Acknowledge a delivery.
   * @returns false when the acknowledgement was lost: the message will be
   * delivered again, or dead-lettered once it reached `maxDeliveries`.
   */
  ack(messageId: string): boolean {
    const entry = this.#unacked.get(messageId);
    if (!entry) return false;
    this.#unacked.delete(messageId);
    const toLose = this.#acksToLose.get(messageId) ?? 0;
    if (toLose === 0) return true;
    this.#acksToLose.set(messageId, toLose - 1);
    if (entry.deliveryCount >= this.#maxDeliveries) this.#deadLetters.push(entry.message);
    else this.#ready.push(entry);
    return false;
  }

  /** Move every dead letter back to the queue (a "redrive"); returns how many. */
  replayDeadLetters(): number {
    const moved = this.#deadLetters.splice(0);
    for (const message of moved) this.#ready.push({ message, deliveryCount: 0, fromDeadLetters: true });
    return moved.length;
  }
}
