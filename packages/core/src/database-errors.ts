/**
 * The errors of a database that cannot serve the engine: a connection lost
 * or refused (a statement's, a transaction's, a COMMIT's), and a
 * background loop's LISTEN connection lost. Both are {@link IdempoError}s
 * with 503; kept apart from `errors.ts` as the errors of the connection
 * rather than of a request.
 */
import { IdempoError } from "./errors.js";

/**
 * The database connection failed or was terminated mid-operation, or the
 * node it reached takes no writes (a standby during a failover), and the
 * engine's bounded retry (`unavailableRetryMs`) did not outlast it (503).
 * A transaction cut off before its COMMIT rolled back. One cut off at its
 * COMMIT, or a statement sent alone that lost its answer, may have landed:
 * `inDoubt` then names it, and the message says so. The engine never
 * assumes either way and never re-runs a phase in process after such an
 * error: the next attempt on the key reads the run's record, resuming after
 * the phase if it committed and running it once if not. Retry the same key.
 * (The name comes from the in-doubt transactions of two-phase commit: an
 * outcome that is found out, never guessed.)
 */
export class DatabaseUnavailableError extends IdempoError {
  /**
   * What may have committed without its acknowledgement, e.g. "the COMMIT of
   * phase 'charge'" or "the call of claim_new_key"; undefined when the
   * failure came before anything was sent, inside an open transaction (which
   * rolled back), or where the engine cannot tell.
   */
  readonly inDoubt: string | undefined;

  /**
   * @param cause the driver's error.
   * @param inDoubt what may have landed when the connection broke after it was sent.
   */
  constructor(cause: unknown, inDoubt?: string) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(
      "database_unavailable",
      503,
      inDoubt === undefined
        ? `the database connection failed: ${detail}; a transaction open at that moment may or may not have ` +
            "committed; the next attempt will find out from the run's recovery point: retry the same key later"
        : `the database connection failed during ${inDoubt}: ${detail}; it may have landed (only its answer ` +
            "was lost) or not, and nothing is assumed: the next attempt on this key reads the run's record and " +
            "carries on after it if it committed, or does it once if not: retry the same key later",
      { cause },
    );
    this.inDoubt = inDoubt;
  }
}

/**
 * A background loop's LISTEN connection (a relay's, a worker's, or the
 * engine's for `wait`) stopped working (503), reported once per loss
 * through the loop's `onError` (the engine's logs it). `reason` says how:
 * `'unresponsive'` when a check round trip (`SELECT 1`) got no answer in
 * time, which is what a half-open connection looks like (a network black
 * hole: no reset, no error), and the client's socket was destroyed so that
 * nothing waits on it; `'failed'` when the connection failed or ended
 * (backend terminated, reset). Nothing is lost: the loop polls meanwhile,
 * and with a `pg.Pool` as its `listen` source it takes a new connection and
 * LISTENs again once the database answers (a plain client cannot reconnect).
 */
export class ListenConnectionLostError extends IdempoError {
  /** How the connection was found lost. */
  readonly reason: "unresponsive" | "failed";
  /** Who listened: `relay`, `worker` or `engine.wait`. */
  readonly listener: string;
  constructor(listener: string, reason: "unresponsive" | "failed", detail: string, options?: { cause?: unknown }) {
    super("listen_connection_lost", 503, `${listener}: the LISTEN connection ${detail}; polling carries on`, options);
    this.reason = reason;
    this.listener = listener;
  }
}
