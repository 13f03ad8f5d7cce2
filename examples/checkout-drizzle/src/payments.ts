/**
 * A stand-in for a payment provider with Stripe-style idempotent requests.
 * It keeps everything in memory and counts what it sees, so the demo can
 * tell requests (a retry may repeat one) from charges (there must be one).
 * Given a journal file, it also remembers its charges across processes, as
 * a real provider does: `idempo resume` in another process then gets the
 * charge the crashed demo made instead of a new one.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";

/** What the provider compares when a key comes back. */
export interface ChargeParams {
  orderId: string;
  amountCents: number;
}

/** A charge the provider made. */
export interface Charge {
  id: string;
  orderId: string;
  amountCents: number;
}

/** One request as the provider logged it. */
export interface ProviderRequest {
  idempotencyKey: string;
  orderId: string;
  /** `charged`: a new charge; `replayed`: answered from the idempotency cache; `refused`: an error or an abandoned call. */
  outcome: "charged" | "replayed" | "refused";
}

/** An error answer from the provider; `retryable` marks the ones worth another try. */
export class PaymentError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "PaymentError";
  }

  /** Server-side trouble (5xx) may pass; a 4xx will not. */
  get retryable(): boolean {
    return this.status >= 500;
  }
}

const MAX_KEY_LENGTH = 255;

/** What the provider remembers of one idempotency key. */
interface KnownKey {
  params: string;
  charge: Charge;
}

/**
 * The fake provider. Like Stripe, it remembers each idempotency key with the
 * parameters it was first used with: the same key and parameters return the
 * original charge without charging again; the same key with other
 * parameters is refused (400).
 *
 * @param options.journal a JSON file the remembered keys are loaded from and saved to (Default: memory only).
 * @example
 * const payments = new FakePaymentProvider()
 * const charge = await payments.charge({ orderId, amountCents: 4999 }, { idempotencyKey })
 */
export class FakePaymentProvider {
  /** Every request received, in order. */
  readonly requests: ProviderRequest[] = [];
  readonly #byKey: Map<string, KnownKey>;
  readonly #journal: string | undefined;
  #failuresLeft = 0;
  #hanging = false;

  constructor(options: { journal?: string } = {}) {
    this.#journal = options.journal;
    const saved = this.#journal && existsSync(this.#journal) ? readFileSync(this.#journal, "utf8") : "[]";
    this.#byKey = new Map(JSON.parse(saved) as [string, KnownKey][]);
  }

  /** Charges actually made (requests answered from the cache do not count). */
  get chargesMade(): number {
    return this.#byKey.size;
  }

  /** The requests made for one order, in order. */
  requestsFor(orderId: string): ProviderRequest[] {
    return this.requests.filter((r) => r.orderId === orderId);
  }

  /** Answer the next `count` requests with a 503 before charging anything (Default: 1). */
  failNext(count = 1): void {
    this.#failuresLeft = count;
  }

  /** Stop answering (`true`) until the caller's signal aborts, or answer again (`false`). */
  hang(on = true): void {
    this.#hanging = on;
  }

  /**
   * Charge `params.amountCents` for `params.orderId`, at most once per key.
   *
   * @throws PaymentError 400 when the key is too long or was used with other parameters; 503 when told to fail.
   * @throws the signal's reason when `signal` aborts while the provider hangs.
   */
  async charge(params: ChargeParams, options: { idempotencyKey: string; signal?: AbortSignal }): Promise<Charge> {
    const { idempotencyKey, signal } = options;
    const refuse = (error: unknown): never => {
      this.requests.push({ idempotencyKey, orderId: params.orderId, outcome: "refused" });
      throw error;
    };
    if (this.#hanging) await untilAborted(signal).catch(refuse);
    if (this.#failuresLeft > 0) {
      this.#failuresLeft--;
      refuse(new PaymentError(503, "provider_unavailable", "the provider is unavailable, try again"));
    }
    if (idempotencyKey.length === 0 || idempotencyKey.length > MAX_KEY_LENGTH) {
      refuse(new PaymentError(400, "invalid_idempotency_key", `idempotency keys are 1-${MAX_KEY_LENGTH} characters`));
    }
    // Compared field by field in a fixed order, so property order never matters.
    const fingerprint = JSON.stringify([params.orderId, params.amountCents]);
    const known = this.#byKey.get(idempotencyKey);
    if (known) {
      if (known.params !== fingerprint) {
        refuse(
          new PaymentError(400, "idempotency_key_reused", "this idempotency key was used with different parameters"),
        );
      }
      this.requests.push({ idempotencyKey, orderId: params.orderId, outcome: "replayed" });
      return known.charge;
    }
    const charge: Charge = { id: `ch_${String(this.#byKey.size + 1).padStart(4, "0")}`, ...params };
    this.#byKey.set(idempotencyKey, { params: fingerprint, charge });
    if (this.#journal) writeFileSync(this.#journal, JSON.stringify([...this.#byKey]));
    this.requests.push({ idempotencyKey, orderId: params.orderId, outcome: "charged" });
    return charge;
  }
}

/** Wait until `signal` aborts, then reject with its reason; without a signal, wait forever. */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (!signal) return;
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}
