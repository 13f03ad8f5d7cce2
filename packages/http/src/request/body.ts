/**
 * What the fingerprint records about a request body: the parsed JSON value
 * (canonicalised by the engine, RFC 8785), or a SHA-256 of the raw bytes
 * for other media types.
 */
import { createHash } from "node:crypto";
import { InvalidRequestBodyError, RequestBodyTooLargeError } from "../problem/errors.js";

/** A request body as the fingerprint sees it. */
export type BodyFacts =
  | { readonly kind: "none" }
  | { readonly kind: "value"; readonly value: unknown }
  | { readonly kind: "bytes"; readonly sha256: string; readonly length: number; readonly type: string | null };

const NONE: BodyFacts = Object.freeze({ kind: "none" });

/** The media type without parameters, lower case (`application/json`), or null. */
function mediaType(contentType: string | undefined | null): string | null {
  const essence = contentType?.split(";")[0]?.trim().toLowerCase();
  return essence ? essence : null;
}

/** `application/json` and every `+json` type (`application/merge-patch+json`, ...). */
function isJsonType(contentType: string | undefined | null): boolean {
  const type = mediaType(contentType);
  return type !== null && (type === "application/json" || type.endsWith("+json"));
}

function bytesFacts(bytes: Uint8Array, contentType: string | undefined | null): BodyFacts {
  return {
    kind: "bytes",
    sha256: createHash("sha256").update(bytes).digest("hex"),
    length: bytes.byteLength,
    type: mediaType(contentType),
  };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Facts of a body the middleware read itself. A JSON body is parsed (the
 * caller hands the parsed value to the handler); an empty body counts as
 * no body.
 * @throws InvalidRequestBodyError (400) when a JSON body does not parse.
 */
export function bodyFromBytes(bytes: Uint8Array, contentType: string | undefined | null): BodyFacts {
  if (bytes.byteLength === 0) return NONE;
  if (!isJsonType(contentType)) return bytesFacts(bytes, contentType);
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch (error) {
    throw new InvalidRequestBodyError(error instanceof Error ? error.message : String(error));
  }
  return { kind: "value", value };
}

/**
 * Facts of a body a framework already parsed: a Buffer or string is hashed
 * as bytes, anything else (parsed JSON or form fields) is fingerprinted as
 * a value.
 */
export function bodyFromParsed(value: unknown, contentType: string | undefined | null): BodyFacts {
  if (value === undefined) return NONE;
  if (value instanceof Uint8Array) return value.byteLength === 0 ? NONE : bytesFacts(value, contentType);
  if (typeof value === "string") {
    if (value.length === 0) return NONE;
    return isJsonType(contentType) ? { kind: "value", value } : bytesFacts(Buffer.from(value, "utf8"), contentType);
  }
  return { kind: "value", value };
}

/**
 * Read a request body, refusing it once it passes `maxBytes` (by its
 * declared Content-Length first, so an oversized upload is refused before
 * it is read).
 * @throws RequestBodyTooLargeError (413)
 */
export async function readBody(
  chunks: AsyncIterable<Uint8Array>,
  declaredLength: string | null | undefined,
  maxBytes: number,
): Promise<Buffer> {
  if (declaredLength && Number(declaredLength) > maxBytes) throw new RequestBodyTooLargeError(maxBytes);
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new RequestBodyTooLargeError(maxBytes);
    parts.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(parts, size);
}
