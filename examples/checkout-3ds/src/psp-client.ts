/**
 * The shop's client for the payment provider's HTTP API: authorize a card
 * payment (which then needs the customer's 3-D Secure confirmation),
 * capture it, or void it. Every call carries the idempotency key idempo
 * derived for the step, so calling again after a crash repeats nothing.
 */
import type { z } from "zod";
import type { referenceSchema } from "./psp-events.js";

/** A payment as the provider answers for it. */
export interface PspPayment {
  readonly id: string;
  readonly orderId: string;
  readonly amountCents: number;
  /** `requires_action` until the customer passes 3-D Secure, then `requires_capture`. */
  readonly status: "requires_action" | "requires_capture" | "captured" | "voided";
  /** Where the customer completes the 3-D Secure challenge. */
  readonly challengeUrl: string;
  readonly reference: z.infer<typeof referenceSchema>;
}

/** An error answer from the provider; 5xx may pass, so a step may try again. */
export class PspError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(`payment provider answered ${status} ${code}`);
    this.name = "PspError";
  }

  get retryable(): boolean {
    return this.status >= 500;
  }
}

/** Per-call options: the step's derived key and its abort signal. */
export interface CallOptions {
  readonly idempotencyKey: string;
  readonly signal?: AbortSignal;
}

/**
 * The client, for the provider at `baseUrl`.
 *
 * @example
 * const psp = new PspClient('http://127.0.0.1:4010')
 * const payment = await psp.authorize({ orderId, amountCents, reference: { tenantId, key } }, { idempotencyKey })
 */
export class PspClient {
  constructor(readonly baseUrl: string) {}

  /** Authorize the amount on the card; the payment then waits for 3-D Secure (`requires_action`). */
  authorize(
    params: { orderId: string; amountCents: number; reference: z.infer<typeof referenceSchema> },
    options: CallOptions,
  ): Promise<PspPayment> {
    return this.#post("/v1/payments", params, options);
  }

  /** Take the authorized money: the charge. */
  capture(paymentId: string, options: CallOptions): Promise<PspPayment> {
    return this.#post(`/v1/payments/${encodeURIComponent(paymentId)}/capture`, {}, options);
  }

  /** Release the authorization: no money moves. */
  void(paymentId: string, options: CallOptions): Promise<PspPayment> {
    return this.#post(`/v1/payments/${encodeURIComponent(paymentId)}/void`, {}, options);
  }

  async #post(path: string, body: object, options: CallOptions): Promise<PspPayment> {
    const res = await fetch(new URL(path, this.baseUrl), {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": options.idempotencyKey },
      body: JSON.stringify(body),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const json = (await res.json()) as PspPayment | { code: string };
    if (!res.ok) throw new PspError(res.status, "code" in json ? json.code : "unknown");
    return json as PspPayment;
  }
}
