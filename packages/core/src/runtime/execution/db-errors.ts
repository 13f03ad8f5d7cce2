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
 * Connection failures are classified where statements are sent and what
 * they did is known: the data layers and the store's calls (see
 * `database/connection-failures.ts`).
 */
export { inDoubt, isConnectionLoss, ranNothing } from "../../database/connection-failures.js";
