/**
 * Where `npm run demo -- --leave-stuck` keeps what it leaves behind for the
 * CLI: a PGlite data directory and the payment provider's journal, both
 * under `.pglite/` at the repository root (ignored by git).
 */
import { fileURLToPath } from "node:url";

/** The PGlite data directory (used when DATABASE_URL is not set). */
export const DEMO_PGLITE_DIR = fileURLToPath(new URL("../../../.pglite/demo", import.meta.url));

/** The fake payment provider's memory of idempotency keys, shared by the demo and `idempo resume`. */
export const PAYMENTS_JOURNAL = fileURLToPath(new URL("../../../.pglite/demo-payments.json", import.meta.url));
