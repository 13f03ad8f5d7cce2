/**
 * A stand-in for a payment provider's transfers API (Stripe Connect's
 * `POST /v1/transfers`, say), in the demo's process. Like Stripe, it keeps
 * each idempotency key with the request it came with and its answer, and
 * answers a repeat with that answer without transferring again; a key
 * reused for another request is refused. A transfer takes a moment (a
 * bank API is slow), and the first transfer to the seller `sel_lost` loses
 * its answer on the way back, after the money moved.
 *
 * Like a real provider it has a rate limit of its own, a little above the
 * one the workflows are given (a client keeps a margin below its
 * provider's limit): a request over it is refused with a 429 and counted.
 * And it measures, from its side of the wire, the most transfers in flight
 * at once for one merchant account.
 */

/** What a transfer request carries besides its key. */
export interface TransferRequest {
  readonly merchantId: string;
  readonly sellerId: string;
  /** What the transfer is for, kept with it (as Stripe's `transfer_group`): one order. */
  readonly orderId: string;
  readonly amountCents: number;
}

/** The provider's answer. JSON, so a step can return it. */
export interface TransferAnswer {
  readonly transferId: string;
  readonly amountCents: number;
}

/** The answer never arrived: the transfer may or may not have been made (here it was). */
export class ProviderTimeoutError extends Error {
  constructor(key: string) {
    super(`payment provider: no answer to request ${key} (timed out)`);
    this.name = "ProviderTimeoutError";
  }
}

/** The request came over the provider's rate limit: nothing was done; try again later. */
export class ProviderRateLimitError extends Error {
  readonly status = 429;
  constructor() {
    super("payment provider: 429 too many requests");
    this.name = "ProviderRateLimitError";
  }
}

/** What the provider did, counted once per effect. */
export interface ProviderCounts {
  /** Requests received, repeats of a key included. */
  requests: number;
  /** Requests answered from a key already seen: nothing was done again. */
  replays: number;
  /** Transfers made, and their sum. */
  transfers: number;
  transferredCents: number;
  /** Answers lost on the way back (the transfer was made). */
  lostAnswers: number;
  /** Requests refused with 429: over the provider's rate limit. */
  refused: number;
}

/** The provider's own limit: 10 requests a second, bursts of 3 (a token bucket, on this process's clock). */
export const PROVIDER_LIMIT = { perSecond: 10, burst: 3 } as const;

/** How long one transfer takes, ms. */
const TRANSFER_MS = 400;

interface Known {
  readonly request: string;
  readonly answer: TransferAnswer;
}

/**
 * The fake provider.
 *
 * @example
 * const provider = new PayoutProvider()
 * await provider.transfer({ merchantId: 'm_books', sellerId: 'sel_ada', orderId: 'ord_1', amountCents: 1200 }, { idempotencyKey })
 */
export class PayoutProvider {
  readonly counts: ProviderCounts = {
    requests: 0,
    replays: 0,
    transfers: 0,
    transferredCents: 0,
    lostAnswers: 0,
    refused: 0,
  };
  readonly #keys = new Map<string, Known>();
  /** Each transfer made, as `orderId sellerId`. */
  readonly #made: string[] = [];
  readonly #inFlight = new Map<string, number>();
  readonly #mostInFlight = new Map<string, number>();
  #tokens: number = PROVIDER_LIMIT.burst;
  #refilledAt = performance.now();

  /**
   * Transfer money from a merchant's account to a seller, once per idempotency key.
   *
   * @throws ProviderRateLimitError (429) over the provider's rate limit: nothing was done.
   * @throws ProviderTimeoutError when the answer is lost (the transfer was made: repeat the request with the same key).
   * @throws Error when the key was used before for another request.
   */
  async transfer(request: TransferRequest, options: { idempotencyKey: string }): Promise<TransferAnswer> {
    this.counts.requests++;
    if (!this.#takeToken()) {
      this.counts.refused++;
      throw new ProviderRateLimitError();
    }
    const merchant = request.merchantId;
    const now = (this.#inFlight.get(merchant) ?? 0) + 1;
    this.#inFlight.set(merchant, now);
    this.#mostInFlight.set(merchant, Math.max(now, this.#mostInFlight.get(merchant) ?? 0));
    try {
      await new Promise((resolve) => setTimeout(resolve, TRANSFER_MS));
      return this.#answer(request, options.idempotencyKey);
    } finally {
      this.#inFlight.set(merchant, (this.#inFlight.get(merchant) ?? 1) - 1);
    }
  }

  #answer(request: TransferRequest, key: string): TransferAnswer {
    const text = JSON.stringify([request.merchantId, request.sellerId, request.orderId, request.amountCents]);
    const known = this.#keys.get(key);
    if (known) {
      if (known.request !== text)
        throw new Error(`payment provider: idempotency key ${key} was used for another request`);
      this.counts.replays++;
      return known.answer;
    }
    this.counts.transfers++;
    this.counts.transferredCents += request.amountCents;
    this.#made.push(`${request.orderId} ${request.sellerId}`);
    const answer = {
      transferId: `tr_${String(this.counts.transfers).padStart(4, "0")}`,
      amountCents: request.amountCents,
    };
    this.#keys.set(key, { request: text, answer });
    if (request.sellerId === "sel_lost" && this.counts.lostAnswers === 0) {
      this.counts.lostAnswers++;
      throw new ProviderTimeoutError(key);
    }
    return answer;
  }

  /** Sellers paid more than once for one order: what must never happen. */
  duplicateTransfers(): number {
    return this.#made.length - new Set(this.#made).size;
  }

  /** The most transfers that were in flight at once for `merchantId`. */
  mostInFlight(merchantId: string): number {
    return this.#mostInFlight.get(merchantId) ?? 0;
  }

  #takeToken(): boolean {
    const now = performance.now();
    const earned = ((now - this.#refilledAt) / 1_000) * PROVIDER_LIMIT.perSecond;
    this.#tokens = Math.min(PROVIDER_LIMIT.burst, this.#tokens + earned);
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
