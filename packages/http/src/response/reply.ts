/** A response to write, independent of the framework. Header names are lower case. */
export interface HttpReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

/** Added to every replayed response, as Stripe and the IETF draft's examples do. */
export const REPLAYED_HEADER = "idempotent-replayed";

/** Statuses that never carry a body (RFC 9110 §6.4.1, §15.3.5, §15.3.6, §15.4.5). */
export function statusAllowsBody(status: number): boolean {
  return !(status < 200 || status === 204 || status === 205 || status === 304);
}

/** A JSON reply: the body is `text` as UTF-8 bytes, unless the status forbids a body. */
export function jsonReply(
  status: number,
  text: string,
  contentType: string,
  headers: Readonly<Record<string, string | readonly string[]>> = {},
): HttpReply {
  if (!statusAllowsBody(status)) return { status, headers, body: Buffer.alloc(0) };
  return { status, headers: { ...headers, "content-type": contentType }, body: Buffer.from(text, "utf8") };
}
