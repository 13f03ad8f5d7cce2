export { RelayOptionsError } from "../errors.js";
export type { WebhookEvent } from "./event.js";
export type { WebhookSenderOptions } from "./sender.js";
export { createWebhookSender, IDEMPOTENCY_KEY_HEADER, WebhookDeliveryError } from "./sender.js";
export { SIGNATURE_HEADER, signatureHeader } from "./signature.js";
export type { VerifyWebhookOptions, WebhookRefusal } from "./verify.js";
export { verifyWebhook, WebhookSignatureError } from "./verify.js";
