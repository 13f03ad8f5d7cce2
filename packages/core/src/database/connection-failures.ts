/**
 * What a failed statement tells about what it did, which is what a failover
 * makes matter. Three cases:
 *
 * - it ran nothing: the connection could not be made (no server takes
 *   connections yet, 57P03 while a standby is being promoted, a refused or
 *   timed-out connect), or the node refused to write (25006: a standby, or a
 *   primary that is being demoted or not yet promoted). Sending it again,
 *   once a writable primary answers, is safe;
 * - it was sent alone, in autocommit, and the connection broke before the
 *   answer: it may have committed (only the answer was lost). Nothing may
 *   be assumed; the run's record says what happened;
 * - anything else (the connection broke inside an open transaction, which
 *   therefore rolled back, or an error of the statement itself).
 *
 * The first two are remembered per error object by the data layer that
 * sent the statement (and refined by the store, which knows which call it
 * was), and read where the error is reported. Nothing here knows a driver.
 */
function sqlstate(error: unknown): string {
  return typeof error === "object" && error !== null ? String((error as { code?: unknown }).code ?? "") : "";
}

/**
 * The database cannot serve the attempt: the connection is gone (class 08,
 * admin shutdown / crash 57P01-57P03, a socket-level failure, a connect that
 * timed out), or it reaches a node that takes no writes (25006,
 * read_only_sql_transaction: during a failover, a standby not yet promoted
 * or a demoted primary). Either way the workflow is not at fault, and the
 * same key may be retried.
 */
export function isConnectionLoss(error: unknown): boolean {
  const code = sqlstate(error);
  if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return true;
  if (code === "25006") return true;
  if (["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"].includes(code)) return true;
  const message = error instanceof Error ? error.message : "";
  // "was closed": node-postgres' client after its connection ended. The last: pg-pool's connectionTimeoutMillis ran out (no server answered, or every client is checked out).
  return /Connection terminated|connection is closed|Client has encountered a connection error|Client was closed and is not queryable|timeout exceeded when trying to connect/i.test(
    message,
  );
}

/** Errors thrown before a connection was had: nothing was sent. */
const unsent = new WeakSet<object>();
/** Errors of the last statement of a transaction that began nothing, sent alone in autocommit. */
const alone = new WeakSet<object>();
/** Errors of a statement sent alone (autocommit) whose answer never came, with what it was. */
const sentAlone = new WeakMap<object, string>();

/**
 * Remember that `error` came while a connection was being had, before
 * anything was sent on it (a data layer's connect, a pool's checkout).
 */
export function markUnsent(error: unknown): void {
  if (typeof error === "object" && error !== null) unsent.add(error);
}

/**
 * Remember that `error` ended the last statement of a transaction opened
 * with `deferBegin` that the data layer ran alone, in autocommit, because
 * nothing had begun (see `SqlSession.query`'s `last`).
 */
export function markAlone(error: unknown): void {
  if (typeof error === "object" && error !== null) alone.add(error);
}

/** True when `error` ended a statement its data layer ran alone (see {@link markAlone}). */
export function ranAlone(error: unknown): boolean {
  return typeof error === "object" && error !== null && alone.has(error);
}

/** Remember that `error` ended `what` (a statement sent alone, or a COMMIT) after it was sent. */
export function markSent(error: unknown, what: string): void {
  if (typeof error === "object" && error !== null && !unsent.has(error)) sentAlone.set(error, what);
}

/**
 * The database refused `error`'s statement without running any of it: a
 * node that takes no writes (25006), or a lost connection before anything
 * was sent. Safe to send again.
 */
export function ranNothing(error: unknown): boolean {
  if (sqlstate(error) === "25006") return true;
  return typeof error === "object" && error !== null && unsent.has(error) && isConnectionLoss(error);
}

/**
 * What may have committed without its answer when `error` came: the
 * description given to {@link markSent} when the connection broke after the
 * statement or COMMIT was sent; undefined when it ran nothing, failed for
 * another reason, or was not sent alone.
 */
export function inDoubt(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null || ranNothing(error) || !isConnectionLoss(error)) return undefined;
  return sentAlone.get(error);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** First pause between two tries, ms; doubled each time up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 50;
const MAX_PAUSE_MS = 1_000;

/**
 * Run `work` until it does not fail with an error that {@link ranNothing},
 * pausing between tries, for at most `budgetMs` (performance clock: it
 * bounds a wait, it decides nothing); then its last error is thrown. Work
 * that fails otherwise fails at once.
 */
export async function retryRefused<T>(budgetMs: number, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    try {
      return await work();
    } catch (error) {
      if (!ranNothing(error) || performance.now() - started + pause > budgetMs) throw error;
      await sleep(pause * (0.5 + Math.random() / 2));
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    }
  }
}
