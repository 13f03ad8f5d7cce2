import { hash } from "node:crypto";

/**
 * The idempotency key a step passes downstream: a pure function of
 * (tenant id, key, workflow name, step name), so every attempt in every
 * process sends the same key, two tenants never collide at a shared
 * provider, and no raw (possibly personal) part leaks to a third party.
 * The result is `idem_` plus 43 base64url characters (48 in all), well
 * under the 255-character limit of Stripe-like providers.
 */
export function deriveStepKey(tenantId: string, key: string, workflow: string, step: string): string {
  // JSON array encoding makes the parts unambiguous ("a|b","c" vs "a","b|c").
  return `idem_${hash("sha256", JSON.stringify([tenantId, key, workflow, step]), "base64url")}`;
}

/**
 * The delivery key of an outbox message enqueued without one: a pure
 * function of (tenant id, key, run id, attempt, phase name, position in the
 * phase), so a phase retried inside one attempt after a rollback enqueues
 * under the same keys, and a key reused after retention (a new run) under
 * new ones. The attempt is part of it because a takeover keeps the run id:
 * with the same key, the successor's insert would wait on the unique index
 * for as long as a paused zombie keeps its uncommitted row, and a phase run
 * again by `retryFrom` would collide with its own first message. Only one
 * attempt's phase ever commits, so a message still exists once. `dlv_`
 * plus 43 base64url characters.
 */
export function deriveDeliveryKey(
  tenantId: string,
  key: string,
  runId: string,
  attempt: number,
  phase: string,
  position: number,
): string {
  return `dlv_${hash("sha256", JSON.stringify([tenantId, key, runId, attempt, phase, position]), "base64url")}`;
}
