/**
 * The NOTIFY channels of durable runs. A notification is only a hint that
 * something changed: every listener also polls, so a lost one costs latency,
 * never a run.
 */
import { createHash } from "node:crypto";
import type { RawBuilder } from "kysely";
import { sql } from "kysely";

/** Runs became due (enqueued, signalled, or a new wake-up time was committed): workers look again. */
export const DUE_CHANNEL = "idempo_due";

/** A durable run completed; the payload is {@link completionTag} of its tenant and key. */
export const DONE_CHANNEL = "idempo_done";

/** The tag a completion notification carries: MD5 hex of tenant, U+001F and key (no key in clear text). */
export function completionTag(tenantId: string, key: string): string {
  return createHash("md5").update(`${tenantId}\u001f${key}`, "utf8").digest("hex");
}

/** The same tag in SQL, over the columns of a row alias. */
export function completionTagSql(alias: string): RawBuilder<unknown> {
  return sql`md5(${sql.ref(`${alias}.tenant_id`)} || chr(31) || ${sql.ref(`${alias}.key`)})`;
}
