/** Classify driver errors by SQLSTATE (PostgreSQL appendix A) and connection failures. */

function sqlstate(error: unknown): string {
  return typeof error === "object" && error !== null ? String((error as { code?: unknown }).code ?? "") : "";
}

/**
 * Serialization failure, deadlock, or a lock wait that ran past
 * `lock_timeout`: the transaction rolled back whole and may be retried.
 */
export function isTransient(error: unknown): boolean {
  const code = sqlstate(error);
  return code === "40001" || code === "40P01" || code === "55P03";
}

/**
 * The database cannot serve the attempt: the connection is gone (class 08,
 * admin shutdown / crash 57P01-57P03, a socket-level failure), or it reaches
 * a node that takes no writes (25006, read_only_sql_transaction: during a
 * failover, a standby not yet promoted or a demoted primary). Either way the
 * attempt's transaction did not commit, the workflow is not at fault, and
 * the same key may be retried.
 */
export function isConnectionLoss(error: unknown): boolean {
  const code = sqlstate(error);
  if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return true;
  if (code === "25006") return true;
  if (["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"].includes(code)) return true;
  const message = error instanceof Error ? error.message : "";
  return /Connection terminated|connection is closed|Client has encountered a connection error/i.test(message);
}
