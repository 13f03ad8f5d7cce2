import type { RawBuilder, Transaction } from "kysely";
import { sql } from "kysely";

/** A phase's transaction; the suite writes through it with plain SQL. */
export type Tx = Transaction<unknown>;

/**
 * Append one row to the effects ledger, in the phase's transaction: it
 * commits exactly when the phase commits, so the ledger counts commits.
 */
export async function logEffect(
  tx: Tx,
  run: { tenantId: string; key: string; attempt: number },
  workflow: string,
  phase: string,
): Promise<void> {
  await sql`INSERT INTO shop.effects (tenant_id, key, workflow, phase, attempt)
            VALUES (${run.tenantId}, ${run.key}, ${workflow}, ${phase}, ${run.attempt})`.execute(tx);
}

/** Run an UPDATE that must touch exactly one row; anything else means an earlier effect is missing. */
export async function updateOne(tx: Tx, query: RawBuilder<unknown>, what: string): Promise<void> {
  const result = await query.execute(tx);
  if (result.numAffectedRows !== 1n) throw new Error(`${what}: expected 1 row, updated ${result.numAffectedRows}`);
}
