import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signatureHeader } from "./signature.js";
import type { WebhookRefusal } from "./verify.js";
import { verifyWebhook, WebhookSignatureError } from "./verify.js";

const SECRET = "whsec_unit";
const NOW = new Date("2026-01-02T03:04:05Z");
const T = Math.floor(NOW.getTime() / 1000);
const BODY = JSON.stringify({
  id: "dlv_1",
  topic: "order.paid",
  tenantId: "t",
  createdAt: NOW.toISOString(),
  payload: { a: 1 },
});

function refusal(run: () => unknown): WebhookRefusal | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof WebhookSignatureError) {
      expect(error).toMatchObject({ code: "webhook_signature_invalid", httpStatus: 400 });
      return error.reason;
    }
    throw error;
  }
  return undefined;
}

describe("verifyWebhook", () => {
  it("accepts the sender's signature and returns the event", () => {
    const event = verifyWebhook({
      body: BODY,
      signature: signatureHeader([SECRET], T, BODY),
      secret: SECRET,
      now: NOW,
    });
    expect(event).toMatchObject({ id: "dlv_1", payload: { a: 1 } });
  });

  it("signs HMAC-SHA256 of `timestamp.body`, hex, as t=...,v1=...", () => {
    const expected = createHmac("sha256", SECRET).update(`${T}.${BODY}`).digest("hex");
    expect(signatureHeader([SECRET], T, BODY)).toBe(`t=${T},v1=${expected}`);
  });

  it("accepts a Buffer body and any of several secrets (rotation), on either side", () => {
    const header = signatureHeader(["old", "new"], T, BODY);
    expect(refusal(() => verifyWebhook({ body: Buffer.from(BODY), signature: header, secret: "new", now: NOW }))).toBe(
      undefined,
    );
    const single = signatureHeader(["new"], T, BODY);
    expect(refusal(() => verifyWebhook({ body: BODY, signature: single, secret: ["old", "new"], now: NOW }))).toBe(
      undefined,
    );
  });

  it("refuses a body changed by one byte, a wrong secret, and a signature moved to another timestamp", () => {
    const header = signatureHeader([SECRET], T, BODY);
    expect(refusal(() => verifyWebhook({ body: `${BODY} `, signature: header, secret: SECRET, now: NOW }))).toBe(
      "no_matching_signature",
    );
    expect(refusal(() => verifyWebhook({ body: BODY, signature: header, secret: "other", now: NOW }))).toBe(
      "no_matching_signature",
    );
    const moved = header.replace(`t=${T}`, `t=${T + 1}`);
    expect(refusal(() => verifyWebhook({ body: BODY, signature: moved, secret: SECRET, now: NOW }))).toBe(
      "no_matching_signature",
    );
  });

  it("refuses a timestamp outside the tolerance, in the past or the future, and accepts one at its edge", () => {
    for (const offset of [-301, 301]) {
      const header = signatureHeader([SECRET], T + offset, BODY);
      expect(refusal(() => verifyWebhook({ body: BODY, signature: header, secret: SECRET, now: NOW }))).toBe(
        "timestamp_out_of_tolerance",
      );
    }
    const edge = signatureHeader([SECRET], T - 300, BODY);
    expect(refusal(() => verifyWebhook({ body: BODY, signature: edge, secret: SECRET, now: NOW }))).toBe(undefined);
    const narrow = signatureHeader([SECRET], T - 10, BODY);
    expect(
      refusal(() => verifyWebhook({ body: BODY, signature: narrow, secret: SECRET, now: NOW, toleranceSeconds: 5 })),
    ).toBe("timestamp_out_of_tolerance");
  });

  it("refuses a missing or malformed header", () => {
    const sig = signatureHeader([SECRET], T, BODY).split(",")[1] as string;
    for (const header of [undefined, null, ""]) {
      expect(refusal(() => verifyWebhook({ body: BODY, signature: header, secret: SECRET, now: NOW }))).toBe(
        "missing_header",
      );
    }
    for (const header of [sig, `t=${T}`, `t=abc,${sig}`, `t=${T},t=${T},${sig}`, "garbage", `t=${T},,${sig}`]) {
      expect(refusal(() => verifyWebhook({ body: BODY, signature: header, secret: SECRET, now: NOW }))).toBe(
        "malformed_header",
      );
    }
  });

  it("refuses signatures that are not 64 hex digits without throwing on their length", () => {
    for (const v1 of ["abc", "zz".repeat(32), "0".repeat(66), ""]) {
      expect(refusal(() => verifyWebhook({ body: BODY, signature: `t=${T},v1=${v1}`, secret: SECRET, now: NOW }))).toBe(
        "no_matching_signature",
      );
    }
  });

  it("ignores signatures of other schemes next to a valid v1", () => {
    const header = `${signatureHeader([SECRET], T, BODY)},v0=deadbeef`;
    expect(refusal(() => verifyWebhook({ body: BODY, signature: header, secret: SECRET, now: NOW }))).toBe(undefined);
  });

  it("refuses a signed body that is not JSON", () => {
    const header = signatureHeader([SECRET], T, "not json");
    expect(refusal(() => verifyWebhook({ body: "not json", signature: header, secret: SECRET, now: NOW }))).toBe(
      "malformed_body",
    );
  });
});
