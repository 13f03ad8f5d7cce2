import type { IdempoError } from "../errors.js";

/** What a keeper does against the database: renew, or end its own lease when the attempt bound passes. */
export interface LeaseOps {
  /** Fenced renewal; false when this attempt no longer owns the key. */
  renew(): Promise<boolean>;
  /** Give the key up now (fenced), so the next retry takes over at once. */
  giveUp(): Promise<unknown>;
  /** The error of an attempt that lost its lease. */
  lostError(): IdempoError;
  /** The error of an attempt that ran past its bound. */
  timeoutError(): IdempoError;
  /** Called once, the first time the lease is found lost (for logs and metrics). */
  onLost(): void;
}

/**
 * Keeps an attempt's lease alive while it works: renews it on an interval
 * (a fraction of the lease) and aborts `signal` the moment a renewal finds
 * the owner token gone. Idea as in graphile-worker's and DBOS's heartbeats;
 * the renewal itself is a fenced UPDATE on the database clock.
 *
 * Renewal is bounded: past `boundMs` (the attempt bound) the keeper stops
 * renewing, gives the key up and aborts `signal`, so an attempt that never
 * settles cannot hold its key for good.
 */
export class LeaseKeeper {
  readonly #controller = new AbortController();
  readonly #ops: LeaseOps;
  #timer: NodeJS.Timeout | undefined;
  #bound: NodeJS.Timeout | undefined;
  #renewing = false;
  /** Set while the attempt's own completing write runs: a beat that then matches nothing is not a loss. */
  #finishing = false;

  constructor(ops: LeaseOps) {
    this.#ops = ops;
  }

  /** Aborted (with a LeaseLostError or AttemptTimeoutError reason) when the attempt must stop. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  start(intervalMs: number, boundMs: number): void {
    this.#timer = setInterval(() => void this.#tick(), intervalMs);
    // The run's own I/O keeps the process alive; the heartbeat must not.
    this.#timer.unref();
    this.#bound = setTimeout(() => void this.#expire(), boundMs);
    this.#bound.unref();
  }

  /**
   * The attempt is about to write its completion or suspension: renewals
   * that find the run finished are expected. `false` takes that back when
   * the write turned out not to end the attempt (a wait found its signal).
   */
  finishing(on = true): void {
    this.#finishing = on;
  }

  /**
   * Mark the lease lost (a fenced write matched nothing) and return the
   * error to raise: the bound's error when the bound already ended the attempt.
   */
  lost(): IdempoError {
    const reason: unknown = this.#controller.signal.reason;
    const error =
      this.#controller.signal.aborted && reason instanceof Error ? (reason as IdempoError) : this.#ops.lostError();
    if (!this.#controller.signal.aborted) {
      this.#controller.abort(error);
      this.#ops.onLost();
    }
    this.stop();
    return error;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#bound) clearTimeout(this.#bound);
    this.#timer = undefined;
    this.#bound = undefined;
  }

  async #tick(): Promise<void> {
    if (this.#renewing || !this.#timer) return;
    this.#renewing = true;
    try {
      if (!(await this.#ops.renew()) && this.#timer) {
        if (this.#finishing) this.stop();
        else this.lost();
      }
    } catch {
      // A failed renewal (connection blip) is retried on the next tick; the
      // fenced writes stay the real guard.
    } finally {
      this.#renewing = false;
    }
  }

  async #expire(): Promise<void> {
    if (!this.#bound) return;
    this.stop();
    // Give the key up first, so that every write this attempt still tries is fenced out.
    await this.#ops.giveUp().catch(() => undefined);
    if (!this.#controller.signal.aborted) this.#controller.abort(this.#ops.timeoutError());
  }
}
