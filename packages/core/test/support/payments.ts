/**
 * A payment provider fake that behaves like Stripe's idempotent requests:
 * the same key with the same params returns the same charge; the same key
 * with other params is a 400; keys over 255 characters are a 400. It counts
 * every call, so tests can tell calls (may repeat) from charges (must not).
 */
export interface ProviderCall {
  key: string;
  params: string;
}

class ProviderError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class FakePayments {
  readonly calls: ProviderCall[] = [];
  readonly #byKey = new Map<string, { params: string; chargeId: string }>();
  #next = 0;

  charge(params: { orderId: string; amountCents: number }, idempotencyKey: string): { id: string } {
    const p = JSON.stringify(params);
    this.calls.push({ key: idempotencyKey, params: p });
    if (idempotencyKey.length > 255) throw new ProviderError(400, "idempotency key too long");
    const seen = this.#byKey.get(idempotencyKey);
    if (seen) {
      if (seen.params !== p) throw new ProviderError(400, "idempotency key reused with different params");
      return { id: seen.chargeId };
    }
    const chargeId = `ch_${++this.#next}`;
    this.#byKey.set(idempotencyKey, { params: p, chargeId });
    return { id: chargeId };
  }

  /** Charges the provider actually created. */
  get charges(): number {
    return this.#byKey.size;
  }

  /** Calls made with this idempotency key (repeats included). */
  callsFor(idempotencyKey: string): ProviderCall[] {
    return this.calls.filter((c) => c.key === idempotencyKey);
  }

  /** Was a charge made under this key? (for reconcile) */
  lookup(idempotencyKey: string): string | undefined {
    return this.#byKey.get(idempotencyKey)?.chargeId;
  }
}
