/**
 * An HTTP response stored as the JSON body the engine keeps: status, the
 * allow-listed headers and the body bytes, as text when they are valid
 * UTF-8 and as base64 otherwise, so binary and text bodies replay byte for
 * byte. A marker field tells a stored HTTP response from anything else.
 */
import type { JsonObject, JsonValue } from "@idempo/core";
import { PROBLEM_CONTENT_TYPE, problemDocument } from "../problem/problem.js";
import type { HttpReply } from "./reply.js";

/** Marker and format version of a stored HTTP response. */
const FORMAT = "idempo.http/1";

/** What a wrapped handler produced, as the adapter captured it. */
export interface CapturedResponse {
  readonly status: number;
  /** Every header the handler set, names in lower case. */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  /** The body bytes; empty when `overflowed`. */
  readonly body: Buffer;
  /** True when the body grew past the buffering cap and was dropped. */
  readonly overflowed: boolean;
}

/** Response headers kept for replays when nothing else is configured. */
export const DEFAULT_REPLAY_HEADERS: readonly string[] = Object.freeze([
  "content-type",
  "location",
  "content-disposition",
  "vary",
]);

/**
 * Kept whenever present: the stored bytes are encoded with it, so a replay
 * without it would be unreadable. A replay decodes them for a request that
 * does not accept the coding (see content-coding.ts).
 */
const BODY_HEADERS = ["content-encoding"];

/** Never stored or replayed, whatever the configuration says. */
const NEVER_REPLAYED = new Set(["set-cookie", "set-cookie2"]);

/**
 * The lower-cased allow-list of replayed headers: the defaults plus `extra`.
 * @throws TypeError when `extra` names `set-cookie`, which is never replayed.
 */
export function replayHeaderSet(extra: readonly string[] = []): ReadonlySet<string> {
  const names = new Set([...DEFAULT_REPLAY_HEADERS, ...BODY_HEADERS]);
  for (const raw of extra) {
    const name = String(raw).toLowerCase();
    if (NEVER_REPLAYED.has(name)) {
      throw new TypeError(`replayHeaders: '${name}' is never replayed (a replay must not hand out a session again)`);
    }
    names.add(name);
  }
  return names;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function bodyJson(body: Buffer): JsonValue {
  if (body.length === 0) return null;
  try {
    return { utf8: utf8.decode(body) };
  } catch {
    return { base64: body.toString("base64") };
  }
}

/** The stored form of a response: only allow-listed headers are kept. */
export function storeResponse(captured: CapturedResponse, allow: ReadonlySet<string>): JsonObject {
  if (captured.overflowed) return tooLargeResponse(captured.status);
  const headers: [string, string][] = [];
  for (const [name, value] of Object.entries(captured.headers)) {
    if (!allow.has(name) || NEVER_REPLAYED.has(name)) continue;
    for (const v of typeof value === "string" ? [value] : value) headers.push([name, v]);
  }
  return { format: FORMAT, status: captured.status, headers, body: bodyJson(captured.body) };
}

/**
 * What is stored when the body outgrew the cap after the handler ran: a
 * completed record with a 500 problem that names the handler's own status,
 * so a retry replays it instead of running the handler again.
 */
function tooLargeResponse(handlerStatus: number): JsonObject {
  const doc = problemDocument(
    "response_too_large",
    500,
    `the handler ran and answered ${handlerStatus}, but its body was larger than this endpoint stores (maxResponseBytes); ` +
      "it was not kept, and retries with this key get this answer instead of running the handler again",
    { handlerStatus },
  );
  return {
    format: FORMAT,
    status: 500,
    headers: [["content-type", PROBLEM_CONTENT_TYPE]],
    body: { utf8: JSON.stringify(doc) },
  };
}

/**
 * Turn a stored body back into a reply.
 * @throws TypeError when the record was not written by this module (another workflow under the same name?).
 */
export function loadResponse(value: JsonValue): HttpReply {
  const v = value as Partial<Record<string, JsonValue>> | null;
  if (v === null || typeof v !== "object" || Array.isArray(v) || v.format !== FORMAT) {
    throw new TypeError("the stored response is not an HTTP response recorded by @idempo/http");
  }
  const headers: Record<string, string | string[]> = {};
  for (const pair of v.headers as [string, string][]) {
    const [name, text] = pair;
    const prior = headers[name];
    headers[name] = prior === undefined ? text : [...(typeof prior === "string" ? [prior] : prior), text];
  }
  const body = v.body as { utf8?: string; base64?: string } | null;
  const bytes =
    body === null
      ? Buffer.alloc(0)
      : body.base64 !== undefined
        ? Buffer.from(body.base64, "base64")
        : Buffer.from(body.utf8 ?? "", "utf8");
  return { status: v.status as number, headers, body: bytes };
}
