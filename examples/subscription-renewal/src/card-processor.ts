/**
 * A stand-in for a card processor, in the demo's process. Like Stripe, it
 * keeps each idempotency key with the request it came with and the answer
 * it gave, declines included, and answers a repeat with that answer
 * without charging again; a key reused for another request is refused.
 * Its test cards behave the same way on every run, so the demo's counts
 * are fixed:
 *
 * | card | what it does |
 * | --- | --- |
 * | `tok_visa` | approved |
 * | `tok_paid_late` | declined (`insufficient_funds`) on every first try of a renewal, approved on the next charge: the money arrives a day late |
 * | `tok_lost_answer` | approved, but the answer to its very first charge is lost on the way back (a timeout after the charge was made) |
 * | `tok_expired` | declined (`expired_card`), always |
 *
 * It counts requests (repeats included) apart from effects (charges), so
 * the demo can tell a retried request from a second charge.
 */

/** What a charge request carries besides its key. */
export interface ChargeRequest {
  readonly card: string;
  readonly amountCents: number;
  /** What the charge is for, kept with it (as Stripe's `metadata`): one subscription's period. */
  readonly subscriptionId: string;
  readonly period: string;
}

/** The processor's answer: a charge, or a decline with its code. JSON, so a step can return it. */
export type ChargeAnswer =
  | { readonly status: "succeeded"; readonly chargeId: string; readonly amountCents: number }
  | { readonly status: "declined"; readonly declineCode: "insufficient_funds" | "expired_card" };

/** The answer never arrived: the request may or may not have been carried out (here it was). */
export class ProcessorTimeoutError extends Error {
  constructor(key: string) {
    super(`card processor: no answer to request ${key} (timed out)`);
    this.name = "ProcessorTimeoutError";
  }
}

/** What the processor did, counted once per effect. */
export interface ProcessorCounts {
  /** Requests received, repeats of a key included. */
  requests: number;
  /** Requests answered from a key already seen: nothing was done again. */
  replays: number;
  /** New charges, and their sum. */
  charges: number;
  chargedCents: number;
  declines: number;
  /** Answers lost on the way back (the request was carried out). */
  lostAnswers: number;
}

interface Known {
  readonly request: string;
  readonly answer: ChargeAnswer;
}

/**
 * The fake processor.
 *
 * @example
 * const cards = new CardProcessor()
 * await cards.charge({ card: 'tok_visa', amountCents: 900, subscriptionId: 'sub_1', period }, { idempotencyKey })
 */
export class CardProcessor {
  readonly counts: ProcessorCounts = {
    requests: 0,
    replays: 0,
    charges: 0,
    chargedCents: 0,
    declines: 0,
    lostAnswers: 0,
  };
  readonly #keys = new Map<string, Known>();
  /** New charge requests seen per card, for the cards whose answer depends on it. */
  readonly #seen = new Map<string, number>();
  /** Each charge made, as `subscriptionId period`. */
  readonly #charged: string[] = [];

  /**
   * Charge a card, once per idempotency key.
   *
   * @throws ProcessorTimeoutError when the answer is lost (the charge was made: repeat the request with the same key).
   * @throws Error when the key was used before for another request.
   */
  async charge(request: ChargeRequest, options: { idempotencyKey: string }): Promise<ChargeAnswer> {
    this.counts.requests++;
    const key = options.idempotencyKey;
    const text = JSON.stringify([request.card, request.amountCents, request.subscriptionId, request.period]);
    const known = this.#keys.get(key);
    if (known) {
      if (known.request !== text)
        throw new Error(`card processor: idempotency key ${key} was used for another request`);
      this.counts.replays++;
      return known.answer;
    }
    const nth = (this.#seen.get(request.card) ?? 0) + 1;
    this.#seen.set(request.card, nth);
    const answer = this.#decide(request, nth);
    this.#keys.set(key, { request: text, answer });
    if (request.card === "tok_lost_answer" && nth === 1) {
      this.counts.lostAnswers++;
      throw new ProcessorTimeoutError(key);
    }
    return answer;
  }

  /** Subscription periods charged more than once: what must never happen. */
  duplicateCharges(): number {
    return this.#charged.length - new Set(this.#charged).size;
  }

  #decide(request: ChargeRequest, nth: number): ChargeAnswer {
    const declineCode =
      request.card === "tok_expired"
        ? "expired_card"
        : request.card === "tok_paid_late" && nth % 2 === 1
          ? "insufficient_funds"
          : undefined;
    if (declineCode) {
      this.counts.declines++;
      return { status: "declined", declineCode };
    }
    this.counts.charges++;
    this.counts.chargedCents += request.amountCents;
    this.#charged.push(`${request.subscriptionId} ${request.period}`);
    return {
      status: "succeeded",
      chargeId: `ch_${String(this.counts.charges).padStart(4, "0")}`,
      amountCents: request.amountCents,
    };
  }
}
