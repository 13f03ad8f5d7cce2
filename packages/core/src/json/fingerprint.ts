import { hash } from "node:crypto";
import canonicalize from "canonicalize";
import type { JsonValue } from "./json-value.js";

/**
 * The RFC 8785 (JCS) canonical JSON of a value: key order, whitespace and
 * number spelling (`1.0` vs `1`) made irrelevant; keys sort by UTF-16 code
 * units, never by locale. The value must already have passed {@link toJsonValue}.
 */
export function canonicalJson(value: JsonValue): string {
  const canonical = canonicalize(value);
  if (canonical === undefined) throw new TypeError("input has no canonical JSON form");
  return canonical;
}

/** SHA-256 (hex) over the workflow name and a canonical JSON text (see {@link canonicalJson}). */
export function fingerprintOf(workflow: string, canonical: string): string {
  // A NUL separator cannot occur in a workflow name (names are validated), so
  // the pair is encoded unambiguously.
  return hash("sha256", `${workflow}\u0000${canonical}`, "hex");
}

/**
 * SHA-256 (hex) over the workflow name and the canonical JSON of the input:
 * the request fingerprint. The value must already have passed {@link toJsonValue}.
 */
export function requestFingerprint(workflow: string, input: JsonValue): string {
  return fingerprintOf(workflow, canonicalJson(input));
}
