import { hash } from "node:crypto";
import canonicalize from "canonicalize";
import type { JsonValue } from "./json-value.js";

/**
 * SHA-256 (hex) over the workflow name and the RFC 8785 (JCS) canonical JSON
 * of the input. Canonicalisation makes key order, whitespace and number
 * spelling (`1.0` vs `1`) irrelevant; keys sort by UTF-16 code units, never
 * by locale. The value must already have passed {@link toJsonValue}.
 */
export function requestFingerprint(workflow: string, input: JsonValue): string {
  const canonical = canonicalize(input);
  if (canonical === undefined) throw new TypeError("input has no canonical JSON form");
  // A NUL separator cannot occur in a workflow name (names are validated), so
  // the pair is encoded unambiguously.
  return hash("sha256", `${workflow}\u0000${canonical}`, "hex");
}
