/**
 * The NOTIFY channels of durable runs. A notification is only a hint that
 * something changed: every listener also polls, so a lost one costs latency,
 * never a run.
 */
import { createHash } from "node:crypto";

/** Runs became due (enqueued, signalled, or a new wake-up time was committed): workers look again. */
export const DUE_CHANNEL = "idempo_due";

/**
 * A durable run completed; the payload is {@link completionTag} of its
 * tenant and key. Sent only by the SQL function `mark_completed` (migration
 * 0014), which spells this channel and calls `completion_tag` for the tag;
 * test/notify-channels.test.ts checks both against these.
 */
export const DONE_CHANNEL = "idempo_done";

/**
 * The tag a completion notification carries: MD5 hex of tenant, U+001F and
 * key (no key in clear text). The SQL function `completion_tag` (migration
 * 0014) computes the same.
 */
export function completionTag(tenantId: string, key: string): string {
  return createHash("md5").update(`${tenantId}\u001f${key}`, "utf8").digest("hex");
}
