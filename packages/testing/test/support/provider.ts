/**
 * A payment provider that behaves like Stripe's idempotent requests: the
 * same key with the same parameters returns the same charge, the same key
 * with other parameters is refused. It counts calls (which may repeat) and
 * charges (which must not).
 */
export class FakeProvider {
  /** Every call, repeats included: the idempotency key it carried. */
  readonly calls: string[] = [];
  /** Every call with its params, as a wire recorder would see it. */
  readonly requests: { idempotencyKey: string; params: unknown }[] = [];
  readonly #byKey = new Map<string, { params: string; id: string }>();

  charge(params: { orderId: string; amountCents: number }, idempotencyKey: string): { id: string } {
    this.calls.push(idempotencyKey);
    this.requests.push({ idempotencyKey, params });
    const p = JSON.stringify(params);
    const seen = this.#byKey.get(idempotencyKey);
    if (seen) {
      if (seen.params !== p) throw new Error(`idempotency key ${idempotencyKey} reused with different parameters`);
      return { id: seen.id };
    }
    const id = `ch_${this.#byKey.size + 1}`;
    this.#byKey.set(idempotencyKey, { params: p, id });
    return { id };
  }

  /** Charges actually created. */
  get charges(): number {
    return this.#byKey.size;
  }
}
