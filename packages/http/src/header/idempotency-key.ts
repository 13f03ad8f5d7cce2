import { InvalidIdempotencyKeyError, MAX_KEY_BYTES } from "@idempo/core";

/** The request header that carries the key (IETF httpapi Idempotency-Key draft). Matched case-insensitively. */
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

/**
 * Read the key from the `Idempotency-Key` header lines of one request.
 *
 * The draft defines the value as an RFC 8941 sf-string (`"8e03978e-40d5"`);
 * the bare form (`8e03978e-40d5`), which most clients send, is accepted too
 * and taken verbatim. Both spellings of one value name the same key. Values
 * are case-sensitive and never trimmed beyond what HTTP itself strips
 * around a field value.
 *
 * @example
 * parseIdempotencyKey(['"k-123"']) // 'k-123'
 * parseIdempotencyKey(['k-123'])   // 'k-123'
 * parseIdempotencyKey([])          // undefined: no header
 *
 * @param lines every header line named Idempotency-Key, in any case, in arrival order.
 * @returns the key, or `undefined` when the header is absent.
 * @throws InvalidIdempotencyKeyError (400) for an empty or blank value,
 *   several values (repeated lines, or comma-joined), characters outside
 *   printable ASCII (control characters included), a malformed or
 *   parameterised sf-string, or more than 255 bytes. The message never
 *   repeats the offending value.
 */
export function parseIdempotencyKey(lines: readonly string[]): string | undefined {
  if (lines.length === 0) return undefined;
  if (lines.length > 1) {
    throw new InvalidIdempotencyKeyError(
      `the ${IDEMPOTENCY_KEY_HEADER} header was sent ${lines.length} times; send exactly one key`,
    );
  }
  const value = lines[0] as string;
  // Cheap bound first, so a huge value is refused without scanning it.
  if (value.length > 2 * MAX_KEY_BYTES + 2) throw tooLong(); // a quoted key may escape every character
  if (!/^[\u0020-\u007e]*$/.test(value)) {
    throw new InvalidIdempotencyKeyError(
      `the ${IDEMPOTENCY_KEY_HEADER} header must be printable ASCII (an RFC 8941 string): no control or non-ASCII characters`,
    );
  }
  const key = value.startsWith('"') ? parseSfString(value) : parseBare(value);
  if (key.length === 0) throw new InvalidIdempotencyKeyError(`the ${IDEMPOTENCY_KEY_HEADER} header must not be empty`);
  if (key.trim().length === 0) {
    throw new InvalidIdempotencyKeyError(`the ${IDEMPOTENCY_KEY_HEADER} header must not be only whitespace`);
  }
  if (key.length > MAX_KEY_BYTES) throw tooLong();
  return key;
}

function tooLong(): InvalidIdempotencyKeyError {
  return new InvalidIdempotencyKeyError(`the ${IDEMPOTENCY_KEY_HEADER} header is longer than ${MAX_KEY_BYTES} bytes`);
}

function parseBare(value: string): string {
  // A comma is how HTTP joins repeated field lines: never pick one of several keys.
  if (value.includes(",")) {
    throw new InvalidIdempotencyKeyError(
      `the ${IDEMPOTENCY_KEY_HEADER} header holds several comma-separated values; send exactly one key (quote a key that contains a comma)`,
    );
  }
  return value;
}

/** RFC 8941 §4.2.5: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, and nothing after it. */
function parseSfString(value: string): string {
  let out = "";
  for (let i = 1; i < value.length; i++) {
    const ch = value[i] as string;
    if (ch === "\\") {
      const next = value[i + 1];
      if (next !== '"' && next !== "\\") {
        throw new InvalidIdempotencyKeyError(
          `the ${IDEMPOTENCY_KEY_HEADER} header is a malformed string: only \\" and \\\\ may be escaped`,
        );
      }
      out += next;
      i++;
    } else if (ch === '"') {
      const rest = value.slice(i + 1);
      if (rest.length === 0) return out;
      if (/^\s*,/.test(rest)) {
        throw new InvalidIdempotencyKeyError(
          `the ${IDEMPOTENCY_KEY_HEADER} header holds several values; send exactly one key`,
        );
      }
      if (rest.startsWith(";")) {
        throw new InvalidIdempotencyKeyError(
          `the ${IDEMPOTENCY_KEY_HEADER} header has parameters, which the draft does not define; send the key alone`,
        );
      }
      break;
    } else {
      out += ch;
    }
  }
  throw new InvalidIdempotencyKeyError(
    `the ${IDEMPOTENCY_KEY_HEADER} header is a malformed string: a quoted key must end with its closing quote`,
  );
}
