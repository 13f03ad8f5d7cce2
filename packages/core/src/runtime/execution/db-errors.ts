/** Classify driver errors by SQLSTATE (PostgreSQL appendix A) and connection failures. */

/**
 * Connection failures are classified where statements are sent and what
 * they did is known: the data layers and the store's calls (see
 * `database/connection-failures.ts`).
 */
export { inDoubt, isConnectionLoss, ranNothing } from "../../database/connection-failures.js";
/** Serialization failures, deadlocks and lock timeouts: see `database/transient-failures.ts`. */
export { isTransient } from "../../database/transient-failures.js";
