/**
 * One confirm channel to RabbitMQ that comes back by itself: when the
 * connection or the channel closes (broker restart, a dropped socket, a
 * channel error), a new connection and channel are opened, retrying with
 * exponential backoff and full jitter until one works or the publisher is
 * closed. Publishes wait for the channel; the relay's signal bounds the wait.
 */
import type { ChannelModel, ConfirmChannel, Message, Options, SocketOptions } from "amqplib";
import { connect } from "amqplib";
import { untilAborted } from "../abort.js";
import { DeliveryNotConfirmedError } from "../errors.js";

export interface ChannelSourceOptions {
  url: string | Options.Connect;
  socketOptions: SocketOptions;
  setup: ((channel: ConfirmChannel) => Promise<void>) | undefined;
  initialDelayMs: number;
  maxDelayMs: number;
  onReturn: (message: Message) => void;
  onError: (error: unknown) => void;
}

export class ReconnectingChannel {
  readonly #options: ChannelSourceOptions;
  readonly #closing = new AbortController();
  #opening: Promise<ConfirmChannel> | undefined;
  #model: ChannelModel | undefined;
  #channel: ConfirmChannel | undefined;

  constructor(options: ChannelSourceOptions) {
    this.#options = options;
  }

  /** The open channel, or the next one once it is open; rejects when `signal` aborts first. */
  get(signal: AbortSignal): Promise<ConfirmChannel> {
    if (this.#closing.signal.aborted) {
      return Promise.reject(new DeliveryNotConfirmedError("closed", "the AMQP publisher was closed"));
    }
    if (this.#channel) return Promise.resolve(this.#channel);
    this.#opening ??= this.#open();
    return untilAborted(this.#opening, signal, "a connection to RabbitMQ");
  }

  async close(): Promise<void> {
    this.#closing.abort();
    const model = this.#model;
    this.#model = undefined;
    this.#channel = undefined;
    await this.#opening?.catch(() => undefined);
    await model?.close().catch(() => undefined);
  }

  async #open(): Promise<ConfirmChannel> {
    for (let attempt = 1; ; attempt++) {
      if (this.#closing.signal.aborted) throw new DeliveryNotConfirmedError("closed", "the AMQP publisher was closed");
      let model: ChannelModel | undefined;
      try {
        model = await connect(this.#options.url, this.#options.socketOptions);
        model.on("error", this.#options.onError);
        const channel = await model.createConfirmChannel();
        channel.on("error", this.#options.onError);
        channel.on("return", this.#options.onReturn);
        await this.#options.setup?.(channel);
        if (this.#closing.signal.aborted) {
          await model.close().catch(() => undefined);
          continue;
        }
        const opened = model;
        // Either closing means the channel is gone: its unconfirmed publishes
        // fail (amqplib calls their callbacks with an error) and are retried by the relay.
        opened.on("close", () => this.#lost(opened));
        channel.on("close", () => this.#lost(opened));
        this.#model = opened;
        this.#channel = channel;
        this.#opening = undefined;
        return channel;
      } catch (error) {
        this.#options.onError(error);
        await model?.close().catch(() => undefined);
        await this.#backoff(attempt);
      }
    }
  }

  #lost(model: ChannelModel): void {
    if (this.#model !== model) return;
    this.#model = undefined;
    this.#channel = undefined;
    model.close().catch(() => undefined); // the channel alone may have closed; do not leak its connection
    if (this.#closing.signal.aborted) return;
    // Reconnect at once rather than on the next publish, so the relay finds a channel ready.
    this.#opening ??= this.#open();
    this.#opening.catch(() => undefined);
  }

  #backoff(attempt: number): Promise<void> {
    const ceiling = Math.min(this.#options.maxDelayMs, this.#options.initialDelayMs * 2 ** (attempt - 1));
    const delay = Math.random() * ceiling;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#closing.signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, delay);
      this.#closing.signal.addEventListener("abort", done, { once: true });
    });
  }
}
