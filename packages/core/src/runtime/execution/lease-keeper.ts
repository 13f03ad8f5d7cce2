import type { IdempoError } from "../../errors.js";

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
 * (a fraction of the lease) and aborts `abortSignal` the moment a renewal finds
 * the owner token gone. Idea as in graphile-worker's and DBOS's heartbeats;
 * the renewal itself is a fenced UPDATE on the database clock.
 *
 * Renewal is bounded: past `boundMs` (the attempt bound) the keeper stops
 * renewing, gives the key up and aborts `abortSignal`, so an attempt that never
 * settles cannot hold its key for good.
 *
 * The `AbortSignal` is made when first asked for (a step's context): an
 * attempt of phases only never needs one, and making one costs more than
 * the rest of the keeper. {@link LeaseKeeper.until} does not need it.
 */
export class LeaseKeeper {
  #controller: AbortController | undefined;
  /** Why the attempt must stop (a LeaseLostError or AttemptTimeoutError); set once. */
  #reason: IdempoError | undefined;
  /** Rejected with the reason when the attempt must stop; made at the first {@link LeaseKeeper.until}. */
  #stopped: Promise<never> | undefined;
  #stop: ((reason: IdempoError) => void) | undefined;
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
  get abortSignal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#reason) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** True once the attempt must stop: `abortSignal` is (or, when made, will be) aborted. */
  get aborted(): boolean {
    return this.#reason !== undefined;
  }

  /**
   * Settle with `work`, or reject with the reason as soon as the attempt
   * must stop: an attempt that lost its lease or ran past its bound ends now
   * even when workflow code ignores its signal. The abandoned work still
   * settles later; its writes are fenced out, and its rejection is dropped here.
   */
  until<T>(work: Promise<T>): Promise<T> {
    if (!this.#stopped) {
      this.#stopped = this.#reason
        ? Promise.reject(this.#reason)
        : new Promise<never>((_, reject) => {
            this.#stop = reject;
          });
      // Nobody may be waiting when it is rejected.
      this.#stopped.catch(() => undefined);
    }
    // First, so that once stopped it wins over work that has settled too; the
    // race also handles a later rejection of the abandoned work.
    return Promise.race([this.#stopped, work]);
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
    const error = this.#reason ?? this.#ops.lostError();
    if (!this.#reason) {
      this.#abort(error);
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

  /** Stop the attempt: abort `abortSignal` (its listeners run first, as they were added first), then the waits. */
  #abort(reason: IdempoError): void {
    this.#reason = reason;
    this.#controller?.abort(reason);
    this.#stop?.(reason);
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
    if (!this.#reason) this.#abort(this.#ops.timeoutError());
  }
}
