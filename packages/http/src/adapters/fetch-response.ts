/**
 * The Fetch API pieces the Fetch-based adapters share (Hono, and the
 * framework-free `Request`/`Response` handler): reading a request's
 * headers and body, turning a reply into a `Response`, and capturing a
 * handler's `Response` to store it.
 */
import { Readable } from "node:stream";
import { readBody } from "../request/body.js";
import type { CapturedResponse } from "../response/envelope.js";
import type { HttpReply } from "../response/reply.js";
import { statusAllowsBody } from "../response/reply.js";
import { problemHeadersToDrop } from "../runtime/send.js";
import type { RequestHeaders } from "../runtime/trace-context.js";
import type { Finished } from "../runtime/wrapped-run.js";

/** A Fetch request's headers as the shared runtime reads them (names are lower case there). */
export function fetchRequestHeaders(headers: Headers): RequestHeaders {
  return { get: (name) => headers.get(name) ?? undefined, keys: () => [...headers.keys()] };
}

/** Read a Fetch body stream within `maxBytes` (413 above it, by its Content-Length first). */
export async function readFetchBody(
  body: ReadableStream<Uint8Array>,
  declaredLength: string | null | undefined,
  maxBytes: number,
): Promise<Buffer> {
  return readBody(Readable.fromWeb(body as never), declaredLength, maxBytes);
}

/** A Fetch `Headers` as a plain record; `set-cookie` lines stay separate. */
function headersRecord(headers: Headers): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of headers) if (name !== "set-cookie") out[name] = value;
  const cookies = headers.getSetCookie();
  if (cookies.length > 0) out["set-cookie"] = cookies;
  return out;
}

/** A reply as a Fetch `Response` (no body for a status that forbids one). */
export function toResponse(reply: HttpReply): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(reply.headers)) {
    for (const v of typeof value === "string" ? [value] : value) headers.append(name, v);
  }
  return new Response(statusAllowsBody(reply.status) ? new Uint8Array(reply.body) : null, {
    status: reply.status,
    headers,
  });
}

/** Read the handler's response body, up to `maxBytes`; past that it is cancelled and dropped. */
export async function captureResponse(res: Response, maxBytes: number): Promise<CapturedResponse> {
  const parts: Uint8Array[] = [];
  let size = 0;
  let overflowed = false;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        overflowed = true;
        await reader.cancel();
        break;
      }
      parts.push(value);
    }
  }
  return {
    status: res.status,
    headers: headersRecord(res.headers),
    body: overflowed ? Buffer.alloc(0) : Buffer.concat(parts),
    overflowed,
  };
}

/**
 * What goes out once the handler's `original` response was handed to the
 * runtime: its status and headers with the stored bytes, or the problem
 * that replaces it (its body-describing headers dropped, the others kept).
 */
export function finishedResponse(original: Response, finished: Finished): Response {
  if (finished.kind === "stored") {
    return new Response(statusAllowsBody(original.status) ? new Uint8Array(finished.body) : null, {
      status: original.status,
      headers: original.headers,
    });
  }
  const headers = new Headers(original.headers);
  for (const name of problemHeadersToDrop([...headers.keys()])) headers.delete(name);
  return toResponse({ ...finished.reply, headers: { ...headersRecord(headers), ...finished.reply.headers } });
}
