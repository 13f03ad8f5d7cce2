/**
 * The pause of a background loop (the outbox relay, the due-run worker)
 * between two looks at the database: it lasts the poll interval, unless a
 * wake-up cuts it short (a NOTIFY, a slot that became free, `stop()`). A
 * wake-up that comes while the loop is busy is kept for its next pause, so
 * none is lost between a look and the pause after it.
 */
export class WakeUp {
  #woken = false;
  #release: (() => void) | undefined;
  readonly #stopping: AbortSignal;

  /** @param stopping the loop's stop signal: once aborted, pauses end at once. */
  constructor(stopping: AbortSignal) {
    this.#stopping = stopping;
  }

  /** End the pause in progress, or the next one. */
  wake(): void {
    this.#woken = true;
    this.#release?.();
  }

  /** Forget earlier wake-ups: called as a round starts to look, since that look sees what they announced. */
  clear(): void {
    this.#woken = false;
  }

  /** Wait `ms` (a poll interval), or less when woken or stopped. */
  pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#woken || this.#stopping.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.#release = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#release = done;
    });
  }
}
