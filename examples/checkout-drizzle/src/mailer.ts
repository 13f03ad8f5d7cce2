/**
 * A stand-in for an email service that accepts a deduplication key per
 * message. It keeps everything in memory and counts what it sees, so the
 * demo can tell deliveries (the outbox relay delivers at least once, so one
 * may repeat) from receipts (there must be one per order).
 */
import { z } from "zod";

/** The outbox topic the checkout queues its receipts under. */
export const RECEIPT_TOPIC = "receipt.email";

/** A receipt as the checkout queues it: which order, paid by which charge. */
export const receiptSchema = z.object({ orderId: z.string().min(1), chargeId: z.string().min(1) });

/** The payload of a `receipt.email` outbox message. */
export type Receipt = z.infer<typeof receiptSchema>;

/** One delivery as the mailer logged it. */
export interface MailDelivery {
  deliveryKey: string;
  orderId: string;
  /** `sent`: a new email went out; `duplicate`: the key was seen before, nothing went out. */
  outcome: "sent" | "duplicate";
}

/**
 * The fake mailer. It remembers each delivery key: the first delivery under
 * a key sends the email, a redelivery under the same key sends nothing.
 *
 * @example
 * const mailer = new FakeMailer()
 * mailer.sendReceipt({ orderId, chargeId }, deliveryKey)
 */
export class FakeMailer {
  /** Every delivery received, in order. */
  readonly deliveries: MailDelivery[] = [];
  readonly #sent = new Map<string, Receipt>();

  /** Receipts actually emailed for `orderId` (duplicates do not count). */
  receiptsFor(orderId: string): number {
    return [...this.#sent.values()].filter((r) => r.orderId === orderId).length;
  }

  /** The delivery key the receipt of `orderId` was first sent under, if it was. */
  keyFor(orderId: string): string | undefined {
    return this.deliveries.find((d) => d.orderId === orderId && d.outcome === "sent")?.deliveryKey;
  }

  /** Email `receipt`, at most once per `deliveryKey`. */
  sendReceipt(receipt: Receipt, deliveryKey: string): void {
    const outcome = this.#sent.has(deliveryKey) ? "duplicate" : "sent";
    if (outcome === "sent") this.#sent.set(deliveryKey, receipt);
    this.deliveries.push({ deliveryKey, orderId: receipt.orderId, outcome });
  }
}
