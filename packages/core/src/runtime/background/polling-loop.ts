/**
 * The skeleton the background loops share (the due-run worker, the outbox
 * relay): rounds that fill free slots, a pause between rounds that a NOTIFY
 * on the loop's channel, a freed slot or `stop()` cuts short, and a stop
 * that waits for the slots in flight. What a round claims is the caller's.
 */
import type { NotificationSource } from "./notifications.js";
import { subscribe } from "./notifications.js";
import { WakeUp } from "./wake-up.js";

export interface PollingLoopOptions {
  /** Slots: most pieces of work in flight at once. */
  readonly concurrency: number;
  /** Pause between rounds in ms when nothing wakes the loop and the round asks for no shorter one. */
  readonly pollMs: number;
  readonly listen: NotificationSource | undefined;
  /** The NOTIFY channel that wakes the loop. */
  readonly channel: string;
  /** Who listens, for the listen errors' wording. */
  readonly listener: string;
  onError(error: unknown): void;
  /** The LISTEN connection failed: told before the loop falls back to polling (Default: `onError`). */
  onListenError?(error: unknown): void;
}

/** What a round did: how many slots it filled, and the longest pause before the next round. */
export interface Round {
  readonly started: number;
  readonly pauseMs: number;
}

/** A running loop. */
export class PollingLoop {
  readonly #options: PollingLoopOptions;
  readonly #stopping = new AbortController();
  readonly #alarm = new WakeUp(this.#stopping.signal);
  readonly #inFlight = new Set<Promise<void>>();
  #unsubscribe: Promise<() => Promise<void>> = Promise.resolve(async () => {});
  #done: Promise<void> = Promise.resolve();

  constructor(options: PollingLoopOptions) {
    this.#options = options;
  }

  /** Aborted once `stop()` is called. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /** End the pause in progress, or the next one. */
  wake(): void {
    this.#alarm.wake();
  }

  /** Take a slot for `work` until it settles (it must not reject); then the loop looks again. */
  occupy(work: Promise<void>): void {
    const slot: Promise<void> = work.finally(() => {
      this.#inFlight.delete(slot);
      this.wake();
    });
    this.#inFlight.add(slot);
  }

  /** Start listening (when a source is given), then run `round(free)` whenever a slot is free. */
  start(round: (free: number) => Promise<Round>): void {
    const { listen, channel, listener, onError } = this.#options;
    const onListenError = this.#options.onListenError ?? onError;
    const wake = () => this.wake();
    this.#unsubscribe = listen
      ? subscribe(
          listen,
          channel,
          wake,
          (error) => {
            onListenError(error);
            wake();
          },
          listener,
        )
      : Promise.resolve(async () => {});
    this.#done = this.#unsubscribe.then(
      () => this.#loop(round),
      (error: unknown) => {
        onError(error);
        return this.#loop(round);
      },
    );
  }

  async #loop(round: (free: number) => Promise<Round>): Promise<void> {
    const { concurrency, pollMs } = this.#options;
    while (!this.#stopping.signal.aborted) {
      this.#alarm.clear();
      const free = concurrency - this.#inFlight.size;
      const { started, pauseMs } = free > 0 ? await round(free) : { started: 0, pauseMs: pollMs };
      if (started === 0 || this.#inFlight.size >= concurrency) await this.#alarm.pause(pauseMs);
    }
    await Promise.all(this.#inFlight);
  }

  /** Stop starting rounds, wait for the work in flight, and stop listening. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    this.wake();
    await this.#done;
    await (await this.#unsubscribe.catch(() => async () => {}))().catch((e: unknown) => this.#options.onError(e));
  }
}
