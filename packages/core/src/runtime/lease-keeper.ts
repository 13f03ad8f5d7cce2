import type { LeaseLostError } from "../errors.js";

/**
 * Keeps an attempt's lease alive while it works: renews it on an interval
 * (a fraction of the lease) and aborts `signal` the moment a renewal finds
 * the owner token gone. Idea as in graphile-worker's and DBOS's heartbeats;
 * the renewal itself is a fenced UPDATE on the database clock.
 */
export class LeaseKeeper {
  readonly #controller = new AbortController();
  readonly #renew: () => Promise<boolean>;
  readonly #lostError: () => LeaseLostError;
  readonly #onLost: () => void;
  #timer: NodeJS.Timeout | undefined;
  #renewing = false;

  /** `onLost` is called once, the first time the lease is found lost. */
  constructor(renew: () => Promise<boolean>, lostError: () => LeaseLostError, onLost: () => void) {
    this.#renew = renew;
    this.#lostError = lostError;
    this.#onLost = onLost;
  }

  /** Aborted (with a LeaseLostError reason) when the lease is lost. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  start(intervalMs: number): void {
    this.#timer = setInterval(() => void this.#tick(), intervalMs);
    // The run's own I/O keeps the process alive; the heartbeat must not.
    this.#timer.unref();
  }

  /** Mark the lease lost (a fenced write matched nothing). */
  lost(): LeaseLostError {
    const error = this.#lostError();
    if (!this.#controller.signal.aborted) {
      this.#controller.abort(error);
      this.#onLost();
    }
    this.stop();
    return error;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #tick(): Promise<void> {
    if (this.#renewing || !this.#timer) return;
    this.#renewing = true;
    try {
      if (!(await this.#renew()) && this.#timer) this.lost();
    } catch {
      // A failed renewal (connection blip) is retried on the next tick; the
      // fenced writes stay the real guard.
    } finally {
      this.#renewing = false;
    }
  }
}
