import { hash } from "node:crypto";

/**
 * The idempotency key a step passes downstream: a pure function of
 * (tenant id, key, workflow name, step name), so every attempt in every
 * process sends the same key, two tenants never collide at a shared
 * provider, and no raw (possibly personal) part leaks to a third party.
 * The result is `idem_` plus 43 base64url characters (48 in all), well
 * under the 255-character limit of Stripe-like providers.
 *
 * A branch of a `.parallel` item passes `step` as the item's name and
 * `branch` as the branch's name: its key is a function of all five parts,
 * never equal to a step's key (a step named `notify/email` and the branch
 * `email` of the item `notify` get different keys).
 *
 * @example
 * ```ts
 * deriveStepKey('acme', 'order-7f3a', 'checkout', 'charge') // what step 'charge' sends
 * deriveStepKey('acme', 'order-7f3a', 'checkout', 'notify', 'email') // branch 'email' of parallel 'notify'
 * ```
 */
export function deriveStepKey(tenantId: string, key: string, workflow: string, step: string, branch?: string): string {
  // JSON array encoding makes the parts unambiguous ("a|b","c" vs "a","b|c"); a branch is a fifth element.
  if (branch !== undefined) {
    return `idem_${hash("sha256", JSON.stringify([tenantId, key, workflow, step, branch]), "base64url")}`;
  }
  return `idem_${hash("sha256", JSON.stringify([tenantId, key, workflow, step]), "base64url")}`;
}

/**
 * The delivery key of an outbox message enqueued without one, in round 0
 * (before any `retryFrom(..., { resendOutbox: true })`): a pure function of
 * (tenant id, key, run id, phase name, position in the phase), so the
 * message has one key on every try, attempt, takeover and `retryFrom`, and a
 * key reused after retention (a new run, a new run id) gets new ones. The
 * attempt is not part of it: the outbox's unique constraint carries it, so
 * a successor never waits behind a paused zombie's uncommitted row. A later
 * round's key is derived from this one in the insert (store/outbox.ts).
 * `dlv_` plus 43 base64url characters.
 */
export function deriveDeliveryKey(
  tenantId: string,
  key: string,
  runId: string,
  phase: string,
  position: number,
): string {
  return `dlv_${hash("sha256", JSON.stringify([tenantId, key, runId, phase, position]), "base64url")}`;
}

/**
 * The key of a child run a `.child` or `.map` item starts: a pure function
 * of (tenant id, the parent's key, the parent's workflow name, the item's
 * name, the child's index in the item's inputs; 0 for `.child`), so every
 * attempt of the parent derives the same keys, and a crash never starts a
 * child twice. The child runs in the parent's tenant. `child_` plus 43
 * base64url characters (49 in all).
 *
 * @example
 * ```ts
 * deriveChildKey('acme', 'payout-7', 'marketplace_payout', 'transfers', 2) // the third seller's transfer
 * ```
 */
export function deriveChildKey(tenantId: string, key: string, workflow: string, item: string, index: number): string {
  return `child_${hash("sha256", JSON.stringify([tenantId, key, workflow, item, index]), "base64url")}`;
}
