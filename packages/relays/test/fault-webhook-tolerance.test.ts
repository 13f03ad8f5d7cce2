/**
 * An option value that turns a safety check off: `verifyWebhook`'s replay
 * window (`toleranceSeconds`) and its clock (`now`). `NaN` (what
 * `Number(process.env.UNSET)` gives), `Infinity`, a negative number or a
 * string made every timestamp pass, so a signed request captured 30 days
 * ago verified. Each is refused with `InvalidOptionError` naming the option
 * and what was given, before anything is checked; a request from 30 days
 * ago is refused under every accepted tolerance.
 */
import { InvalidOptionError } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { signatureHeader } from "../src/webhook/signature.ts";
import { verifyWebhook, WebhookSignatureError } from "../src/webhook/verify.ts";

const SECRET = "whsec_tolerance";
const NOW = new Date("2026-12-01T10:00:00Z");
const BODY = JSON.stringify({ id: "dlv_old", topic: "order.paid", tenantId: "t", payload: {} });
const THIRTY_DAYS_S = 30 * 24 * 3600;
const oldSignature = signatureHeader([SECRET], Math.floor(NOW.getTime() / 1000) - THIRTY_DAYS_S, BODY);

function verifyWith(options: { toleranceSeconds?: unknown; now?: unknown }) {
  return () =>
    verifyWebhook({ body: BODY, signature: oldSignature, secret: SECRET, now: NOW, ...options } as Parameters<
      typeof verifyWebhook
    >[0]);
}

describe("verifyWebhook refuses option values that would turn its replay window off", () => {
  it.each([
    ["NaN (an unset variable through Number())", Number.NaN, /got NaN/],
    ["Infinity", Number.POSITIVE_INFINITY, /got Infinity/],
    ["-Infinity", Number.NEGATIVE_INFINITY, /got -Infinity/],
    ["a negative number", -1, /got -1/],
    ["a string", "300", /got the string "300"/],
    ["an empty string (an empty variable)", "", /got the string ""/],
    ["null", null, /got null/],
    ["a fraction", 0.5, /got 0\.5/],
    ["more than a day", 86_401, /got 86401/],
  ])("toleranceSeconds: %s", (_what, value, given) => {
    let error: unknown;
    try {
      verifyWith({ toleranceSeconds: value })();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error).toMatchObject({ code: "invalid_option", option: "toleranceSeconds" });
    expect((error as Error).message).toMatch(/toleranceSeconds/);
    expect((error as Error).message).toMatch(given);
  });

  it("now: an invalid Date or something else than a Date is refused", () => {
    for (const now of [new Date(Number.NaN), "2026-12-01", NOW.getTime()]) {
      expect(verifyWith({ now })).toThrow(InvalidOptionError);
    }
  });

  it("a request signed 30 days ago is refused under every accepted tolerance, the default included", () => {
    for (const toleranceSeconds of [undefined, 0, 300, 86_400]) {
      expect(verifyWith({ toleranceSeconds })).toThrow(WebhookSignatureError);
    }
  });
});
