/**
 * What the test routes did, counted in memory: handler runs per tag, the
 * payment provider's calls and charges, and gates that hold a handler or a
 * phase until the test opens them.
 */

/** A fake provider that deduplicates on the idempotency key, like Stripe. */
class FakePayments {
  readonly calls: { key: string; amountCents: number }[] = [];
  readonly #byKey = new Map<string, string>();
  #next = 0;

  charge(key: string, amountCents: number): string {
    this.calls.push({ key, amountCents });
    let id = this.#byKey.get(key);
    if (!id) {
      id = `ch_${++this.#next}`;
      this.#byKey.set(key, id);
    }
    return id;
  }

  /** Distinct charges made under these keys. */
  chargesFor(keys: readonly string[]): number {
    return keys.filter((k) => this.#byKey.has(k)).length;
  }
}

class Gate {
  readonly #waiting: (() => void)[] = [];
  #open = false;
  #arrivals = 0;
  readonly #arrived: { count: number; resolve: () => void }[] = [];

  /** Wait here until the test opens the gate. */
  async pass(): Promise<void> {
    this.#arrivals++;
    for (const w of this.#arrived.filter((a) => a.count <= this.#arrivals)) w.resolve();
    if (this.#open) return;
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  /** Resolves once `count` callers have reached the gate. */
  reached(count = 1): Promise<void> {
    if (this.#arrivals >= count) return Promise.resolve();
    return new Promise((resolve) => this.#arrived.push({ count, resolve }));
  }

  open(): void {
    this.#open = true;
    for (const w of this.#waiting.splice(0)) w();
  }
}

export class Effects {
  readonly payments = new FakePayments();
  readonly #runs = new Map<string, number>();
  readonly #gates = new Map<string, Gate>();

  /** Count one handler (or phase) run under `tag`. */
  ran(tag: unknown): void {
    const t = String(tag);
    this.#runs.set(t, (this.#runs.get(t) ?? 0) + 1);
  }

  runs(tag: string): number {
    return this.#runs.get(tag) ?? 0;
  }

  gate(name: string): Gate {
    let gate = this.#gates.get(name);
    if (!gate) {
      gate = new Gate();
      this.#gates.set(name, gate);
    }
    return gate;
  }
}
