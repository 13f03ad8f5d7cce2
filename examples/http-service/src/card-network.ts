/**
 * A fake card network that honours idempotency keys the way real payment
 * providers do: the same key returns the same authorization, however often
 * it is sent. It is slow on purpose (`NETWORK_DELAY_MS`, default 1500 ms)
 * so a second request can arrive while the first is still in flight.
 */
import { randomUUID } from "node:crypto";

const delayMs = Number(process.env.NETWORK_DELAY_MS ?? 1500);
const byKey = new Map<string, string>();
let calls = 0;

/** Authorize `amount`; returns the network's reference, the same one for the same key. */
export async function authorize(idempotencyKey: string, amount: number): Promise<{ ref: string; approved: boolean }> {
  calls++;
  await new Promise((resolve) => setTimeout(resolve, delayMs));
  let ref = byKey.get(idempotencyKey);
  if (!ref) {
    ref = `auth_${randomUUID().slice(0, 8)}`;
    byKey.set(idempotencyKey, ref);
  }
  // The test card number of this fake: an amount ending in 02 is declined.
  return { ref, approved: amount % 100 !== 2 };
}

/** Calls received and distinct authorizations made, for the stats endpoint. */
export function networkStats(): { calls: number; authorizations: number } {
  return { calls, authorizations: byKey.size };
}
