/** Pieces every adapter uses when it writes a reply. */
import { problemDocument } from "../problem/problem.js";
import type { HttpReply } from "../response/reply.js";
import { jsonReply } from "../response/reply.js";

/**
 * Headers of the handler's response that describe its body or its
 * resource; when a problem replaces that response they must go. Others
 * (CORS, request ids, cookies the handler set) stay.
 */
export function problemHeadersToDrop(names: Iterable<string>): string[] {
  return [...names].filter((name) => {
    const n = name.toLowerCase();
    return n.startsWith("content-") || n === "location" || n === "etag" || n === "last-modified";
  });
}

/** A 500 problem for an error the framework can no longer take (Express, after the handler answered). */
export function internalErrorReply(): HttpReply {
  const doc = problemDocument("internal_error", 500, undefined);
  return jsonReply(500, JSON.stringify(doc), "application/problem+json");
}

/**
 * A request refused for its size still has its body on the wire. On
 * HTTP/1.1 the connection cannot be reused after that, so the answer says
 * so (HTTP/2 streams need nothing, and forbid the header).
 */
export function closingIfUnread(reply: HttpReply, httpVersionMajor: number | undefined): HttpReply {
  if (reply.status !== 413 || httpVersionMajor !== 1) return reply;
  return { ...reply, headers: { ...reply.headers, connection: "close" } };
}
