/**
 * The size bound of stored values (`createEngine({ maxPayloadBytes })`):
 * a value's size is the UTF-8 byte length of its canonical JSON. Plain
 * `JSON.stringify` text of a JSON value has the same length as its
 * canonical form (only the key order differs), so whichever text the
 * engine already made is measured: nothing is serialised for the check.
 */
import { PayloadTooLargeError } from "../errors.js";

/** The default bound: 1 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576;
/** The largest bound accepted: the largest value one PostgreSQL field holds (1 GB - 1). */
export const MAX_PAYLOAD_BYTES = 1_073_741_823;

/**
 * True when the JSON text `text` is at most `maxBytes` UTF-8 bytes. A
 * UTF-16 code unit is 1 to 3 UTF-8 bytes, so short and long texts are
 * decided by their length; only those in between are measured.
 */
export function fitsPayload(text: string, maxBytes: number): boolean {
  if (text.length * 3 <= maxBytes) return true;
  if (text.length > maxBytes) return false;
  return Buffer.byteLength(text, "utf8") <= maxBytes;
}

/**
 * Refuse a value whose JSON text is over the bound.
 *
 * @param what the value, as the error names it: "input", "signal 'confirmed' payload".
 * @throws PayloadTooLargeError with the exact size.
 */
export function checkPayloadSize(what: string, text: string, maxBytes: number): void {
  if (!fitsPayload(text, maxBytes)) {
    throw new PayloadTooLargeError(what, Buffer.byteLength(text, "utf8"), maxBytes);
  }
}
