/**
 * The content coding of a replayed response. A stored body keeps the
 * coding it was written in (compression mounted inside the middleware, or
 * a handler that encodes its own answer): the first caller accepted it,
 * but a retry may not. A replay sends the stored coding only to a request
 * whose `Accept-Encoding` accepts it (RFC 9110 §12.5.3, as the `negotiator`
 * package reads it: no header means identity only, as compression
 * middleware reads it too); any other request gets the body decoded to
 * identity, and a compression middleware mounted outside may encode it
 * again for that request. Either way the answer varies on
 * `Accept-Encoding`, so `Vary` names it.
 */
import { promisify } from "node:util";
import zlib from "node:zlib";
import Negotiator from "negotiator";
import { ReplayNotAcceptableError } from "../problem/errors.js";
import type { HttpReply } from "./reply.js";

type Decoder = (body: Buffer) => Promise<Buffer>;

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const inflateRaw = promisify(zlib.inflateRaw);
const brotli = promisify(zlib.brotliDecompress);
// Node 22.15 and later; absent on Node 20.
const zstd = (zlib as { zstdDecompress?: typeof zlib.gunzip }).zstdDecompress;

const DECODERS: Readonly<Record<string, Decoder>> = {
  gzip: (body) => gunzip(body),
  "x-gzip": (body) => gunzip(body),
  // RFC 9110 `deflate` is zlib-wrapped; some encoders send the raw stream.
  deflate: (body) => inflate(body).catch(() => inflateRaw(body)),
  br: (body) => brotli(body),
  ...(zstd ? { zstd: promisify(zstd) as Decoder } : {}),
};

/** The codings of a `Content-Encoding` value, in the order they were applied, lower case, identity left out. */
function codingsOf(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  return (typeof value === "string" ? [value] : value)
    .flatMap((v) => v.split(","))
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
}

function accepts(acceptEncoding: string | undefined, coding: string): boolean {
  const negotiator = new Negotiator({ headers: { "accept-encoding": acceptEncoding } });
  // RFC 9110 §8.4.1.3: x-gzip is gzip.
  const names = coding === "x-gzip" ? ["gzip", "x-gzip"] : [coding];
  return negotiator.encodings(names).length > 0;
}

/** `Vary` with `Accept-Encoding` in it (unless it is `*`). */
function varyingOnEncoding(vary: string | readonly string[] | undefined): string | readonly string[] {
  if (vary === undefined) return "Accept-Encoding";
  const names = (typeof vary === "string" ? [vary] : vary).flatMap((v) => v.split(",")).map((v) => v.trim());
  if (names.some((n) => n === "*" || n.toLowerCase() === "accept-encoding")) return vary;
  return [...names.filter((n) => n !== ""), "Accept-Encoding"].join(", ");
}

/**
 * `reply` as it may go to a request that sent `acceptEncoding`: as stored
 * when it has no content coding or the request accepts every coding it
 * has; otherwise its body decoded to identity, without `Content-Encoding`
 * (a strong `ETag` of the encoded bytes becomes weak).
 *
 * @throws ReplayNotAcceptableError (406) when a coding the request does not accept cannot be decoded here.
 */
export async function replayForEncoding(reply: HttpReply, acceptEncoding: string | undefined): Promise<HttpReply> {
  const codings = codingsOf(reply.headers["content-encoding"]);
  if (codings.length === 0) return reply;
  const headers: Record<string, string | readonly string[]> = {
    ...reply.headers,
    vary: varyingOnEncoding(reply.headers.vary),
  };
  if (codings.every((coding) => accepts(acceptEncoding, coding))) return { ...reply, headers };
  let body = reply.body;
  for (const coding of [...codings].reverse()) {
    const decode = DECODERS[coding];
    if (!decode) throw new ReplayNotAcceptableError(codings.join(", "));
    try {
      body = await decode(body);
    } catch (error) {
      throw new ReplayNotAcceptableError(codings.join(", "), { cause: error });
    }
  }
  delete headers["content-encoding"];
  const etag = headers.etag;
  if (typeof etag === "string" && !etag.startsWith("W/")) headers.etag = `W/${etag}`;
  return { status: reply.status, headers, body };
}
