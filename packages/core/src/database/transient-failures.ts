/**
 * Failures after which a transaction rolled back whole and may simply be
 * run again, read from the SQLSTATE (PostgreSQL appendix A). Used by the
 * phase runner and by the store's own multi-row statements (a cancel of a
 * tree of children), so both retry the same failures.
 */

/** How many `cause` links are followed to the driver's error. */
const CAUSE_DEPTH = 3;

/**
 * The SQLSTATE of a driver error, or of the driver error a query builder's
 * error wraps as its `cause` (Drizzle's `Failed query: ...`); "" for none.
 */
function sqlstate(error: unknown): string {
  let current = error;
  for (let depth = 0; depth <= CAUSE_DEPTH && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return "";
}

/**
 * Serialization failure, deadlock, or a lock wait that ran past
 * `lock_timeout`: the transaction rolled back whole and may be retried.
 * Also under a query builder's own error that carries the driver's as its
 * `cause` (Drizzle), so every data layer retries the same failures.
 */
export function isTransient(error: unknown): boolean {
  const code = sqlstate(error);
  return code === "40001" || code === "40P01" || code === "55P03";
}
