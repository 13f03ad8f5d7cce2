/**
 * The skeleton the background loops share (the due-run worker, the outbox
 * relay): rounds that fill free slots, a pause between rounds that a NOTIFY
 * on the loop's channel, a freed slot or `stop()` cuts short, and a stop
 * that waits for the slots in flight. What a round claims is the caller's.
 *
 * `stop()` is bounded whatever the connections do: a round in progress (a
 * poll query, possibly stuck on a half-open connection) is waited for at
 * most `answerTimeoutMs`, then abandoned: what it claims when it returns
 * later is not started (claims run out and are taken again), and so is the
 * UNLISTEN. The slots in flight are waited for; each is bounded by its
 * caller (a delivery by its claim, a run by its attempt bound).
 */
import { within } from "./bounded-wait.js";
import { ListenSession } from "./listen-session.js";
import type { NotificationSource } from "./notifications.js";
import { WakeUp } from "./wake-up.js";

export interface PollingLoopOptions {
  /** Slots: most pieces of work in flight at once. */
  readonly concurrency: number;
  /** Pause between rounds in ms when nothing wakes the loop and the round asks for no shorter one. */
  readonly pollMs: number;
  readonly listen: NotificationSource | undefined;
  /** Interval between two round trips that check the LISTEN connection, in ms. */
  readonly listenCheckMs: number;
  /** The longest a check, a LISTEN, an UNLISTEN, or at `stop()` a round in progress, may take, in ms. */
  readonly answerTimeoutMs: number;
  /** Where the options are checked, for an invalid `listen`'s error. */
  readonly at: string;
  /** The NOTIFY channel that wakes the loop. */
  readonly channel: string;
  /** Who listens, for the listen errors' wording. */
  readonly listener: string;
  onError(error: unknown): void;
  /** LISTEN is back on a new connection after a reported loss (the loop also looks again at once). */
  onListenBack(): void;
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
  readonly #session: ListenSession | undefined;
  /** Set when `stop()` stopped waiting for a round: what it returns is not started. */
  #abandoned = false;
  #done: Promise<void> = Promise.resolve();

  constructor(options: PollingLoopOptions) {
    this.#options = options;
    const { listen, channel, listener, listenCheckMs: checkMs, answerTimeoutMs, onError } = options;
    const wake = () => this.wake();
    this.#session = listen
      ? new ListenSession(
          {
            source: listen,
            channel,
            listener,
            checkMs,
            answerTimeoutMs,
            onNotify: wake,
            onLost: (error) => {
              onError(error);
              wake();
            },
            onBack: () => {
              options.onListenBack();
              wake(); // notifications sent while it was down are lost: look now
            },
            onError,
          },
          options.at,
        )
      : undefined;
  }

  /** Aborted once `stop()` is called. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /** End the pause in progress, or the next one. */
  wake(): void {
    this.#alarm.wake();
  }

  /**
   * Take a slot for the work `begin` starts (it must not reject) until it
   * settles; then the loop looks again. Not started once `stop()` gave up
   * on the round that asks for it.
   */
  occupy(begin: () => Promise<void>): void {
    if (this.#abandoned) return;
    const slot: Promise<void> = begin().finally(() => {
      this.#inFlight.delete(slot);
      this.wake();
    });
    this.#inFlight.add(slot);
  }

  /** Start listening (when a source is given), then run `round(free)` whenever a slot is free. */
  start(round: (free: number) => Promise<Round>): void {
    const listening = this.#session?.start() ?? Promise.resolve();
    this.#done = listening.then(() => this.#loop(round));
  }

  async #loop(round: (free: number) => Promise<Round>): Promise<void> {
    const { concurrency, pollMs } = this.#options;
    while (!this.#stopping.signal.aborted) {
      this.#alarm.clear();
      const free = concurrency - this.#inFlight.size;
      const { started, pauseMs } = free > 0 ? await round(free) : { started: 0, pauseMs: pollMs };
      if (started === 0 || this.#inFlight.size >= concurrency) await this.#alarm.pause(pauseMs);
    }
  }

  /**
   * Stop starting rounds; wait for the round in progress (at most
   * `answerTimeoutMs`) and for the work in flight; stop listening.
   */
  async stop(): Promise<void> {
    this.#stopping.abort();
    this.wake();
    await within(this.#options.answerTimeoutMs, this.#done).catch(() => {
      this.#abandoned = true;
    });
    await Promise.all([...this.#inFlight]);
    await this.#session?.stop();
  }
}
