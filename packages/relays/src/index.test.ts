import { describe, expect, it } from "vitest";
import * as amqp from "./amqp/index.js";
import * as root from "./index.js";
import * as nats from "./nats/index.js";
import * as webhook from "./webhook/index.js";

describe("public API", () => {
  // Changing what a package exports is a decision: update these lists on purpose.
  it("exports exactly these names", () => {
    expect(Object.keys(root).sort()).toEqual(["DeliveryNotConfirmedError", "RelayOptionsError"]);
    expect(Object.keys(amqp).sort()).toEqual(["DeliveryNotConfirmedError", "RelayOptionsError", "createAmqpPublisher"]);
    expect(Object.keys(nats).sort()).toEqual([
      "DeliveryNotConfirmedError",
      "MSG_ID_HEADER",
      "RelayOptionsError",
      "createJetStreamPublisher",
    ]);
    expect(Object.keys(webhook).sort()).toEqual([
      "IDEMPOTENCY_KEY_HEADER",
      "RelayOptionsError",
      "SIGNATURE_HEADER",
      "WebhookDeliveryError",
      "WebhookSignatureError",
      "createWebhookSender",
      "signatureHeader",
      "verifyWebhook",
    ]);
  });
});
