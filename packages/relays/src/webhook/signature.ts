/**
 * The webhook signature scheme, after the one Stripe documents for its
 * webhooks: an HMAC-SHA256, keyed with the endpoint's secret, over the
 * Unix timestamp, a dot and the raw body; sent as `t=<seconds>,v1=<hex>`.
 * Signing the timestamp with the body lets a receiver refuse a captured
 * request replayed later.
 */
import { createHmac } from "node:crypto";

/** The request header that carries the signature. */
export const SIGNATURE_HEADER = "Idempo-Signature";

// The scheme's version tag in the header (`v1=`): a later scheme gets a new tag next to it.
const SIGNATURE_SCHEME = "v1";

/** Hex HMAC-SHA256 of `${timestamp}.${body}` under `secret`. */
export function computeSignature(secret: string, timestamp: number, body: string | Uint8Array): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/**
 * The header value for a body sent at `timestamp` (Unix seconds), signed
 * with each of `secrets`: during a secret rotation, sign with the old and
 * the new secret, and a receiver that knows either accepts the request.
 */
export function signatureHeader(secrets: readonly string[], timestamp: number, body: string | Uint8Array): string {
  const parts = secrets.map((s) => `${SIGNATURE_SCHEME}=${computeSignature(s, timestamp, body)}`);
  return [`t=${timestamp}`, ...parts].join(",");
}

/** The timestamp and the `v1` signatures of a header value, or `undefined` when it is malformed. */
export function parseSignatureHeader(value: string): { timestamp: number; signatures: string[] } | undefined {
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of value.split(",")) {
    const eq = part.indexOf("=");
    if (eq <= 0) return undefined;
    const name = part.slice(0, eq).trim();
    const item = part.slice(eq + 1).trim();
    if (name === "t") {
      if (!/^\d{1,12}$/.test(item) || timestamp !== undefined) return undefined;
      timestamp = Number(item);
    } else if (name === SIGNATURE_SCHEME) {
      signatures.push(item);
    }
    // Other schemes are ignored, so a receiver keeps working when a sender adds one.
  }
  if (timestamp === undefined || signatures.length === 0) return undefined;
  return { timestamp, signatures };
}
