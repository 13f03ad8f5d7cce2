/**
 * The provider's webhook events, as both sides see them: the fake provider
 * signs and sends them, the shop's webhook route checks the signature and
 * reads them. The signature is an HMAC-SHA256 of the body's exact bytes
 * with the endpoint's secret, hex in the `Psp-Signature` header, the way
 * most payment providers sign their webhooks.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/** The header the signature travels in. */
export const PSP_SIGNATURE_HEADER = "psp-signature";

/** The provider's sign of `body` with `secret`. */
export function signBody(secret: string, body: Uint8Array | string): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

/** True when `signature` is the provider's sign of these exact bytes (compared in constant time). */
export function signatureMatches(secret: string, body: Uint8Array, signature: string | undefined): boolean {
  const given = Buffer.from(signature ?? "", "utf8");
  const expected = Buffer.from(signBody(secret, body), "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** What the shop attached to the payment, echoed in its events: which idempo run the payment belongs to. */
export const referenceSchema = z.object({ tenantId: z.string().min(1), key: z.string().min(1) });

/** The payload of a 3-D Secure result: which payment, and how the customer's challenge ended. */
export const threeDsResultSchema = z.object({
  paymentId: z.string().min(1),
  outcome: z.enum(["succeeded", "failed"]),
});

/** One webhook event. `id` is the same on every delivery of the event. */
export const pspEventSchema = z.object({
  id: z.string().min(1),
  type: z.string().min(1),
  data: threeDsResultSchema.extend({ reference: referenceSchema }),
});

/** The event type of a finished 3-D Secure challenge. */
export const THREE_DS_COMPLETED = "payment.3ds_completed";

export type PspEvent = z.infer<typeof pspEventSchema>;
