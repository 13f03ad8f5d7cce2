/** The options that say how a loop checks its LISTEN connection and bounds its waits on the database. */
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";

/**
 * How a loop (a relay, a worker, or an engine's waiters) tells a half-open
 * LISTEN connection from a quiet one, and how long it waits on the database.
 */
export interface ListenCheckOptions {
  /**
   * Interval in ms between two round trips (`SELECT 1`) on the `listen`
   * connection: a connection that stops answering without an error (a
   * network black hole) is noticed within about this plus
   * `answerTimeoutMs` (Default: 5 000).
   */
  listenCheckMs?: number;
  /**
   * The longest in ms the database may take to answer a check, a LISTEN or
   * an UNLISTEN, and, once `stop()` is called, a poll round in progress.
   * Past it the LISTEN connection counts as lost (reported once through
   * `onError`, its socket destroyed, polling carries on) and `stop()` stops
   * waiting for that answer (Default: 5 000).
   */
  answerTimeoutMs?: number;
}

/** The two checked, with their defaults. */
export function listenChecks(at: string, opts: ListenCheckOptions | undefined): Required<ListenCheckOptions> {
  return {
    listenCheckMs: intOption(at, "listenCheckMs", opts?.listenCheckMs, 1, MAX_TIMER_MS, 5_000),
    answerTimeoutMs: intOption(at, "answerTimeoutMs", opts?.answerTimeoutMs, 1, MAX_TIMER_MS, 5_000),
  };
}
