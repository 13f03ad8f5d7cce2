/** The shop's client in the demo: a browser or mobile app calling the shop's API, with its API key. */

/** One answer as the client sees it. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
}

/** Call the shop at `baseUrl`: `POST path` with a JSON body and an idempotency key, or `GET path`. */
export async function call(
  baseUrl: string,
  path: string,
  options: { key?: string; json?: unknown; apiKey?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey ?? "sk_acme"}` };
  if (options.key) headers["idempotency-key"] = options.key;
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(new URL(path, baseUrl), {
    method: options.json === undefined ? "GET" : "POST",
    headers,
    ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as unknown) : null };
}

/** `status body` and the headers a client acts on, on one line. */
export function describeAnswer(a: Answer): string {
  const hints = ["location", "retry-after", "idempotent-replayed"]
    .filter((h) => a.headers.get(h) !== null)
    .map((h) => `${h}: ${a.headers.get(h)}`);
  // A problem document is long: its code (and retry hint) is what a client reads.
  const problem = a.body as { type?: unknown; code?: unknown; retryAfterMs?: unknown } | null;
  const shown =
    typeof problem?.type === "string" && problem.type.startsWith("urn:idempo:problem:")
      ? `problem ${String(problem.code)}${problem.retryAfterMs === undefined ? "" : `, retryAfterMs ${String(problem.retryAfterMs)}`}`
      : JSON.stringify(a.body);
  return `${a.status} ${shown}${hints.length ? `  [${hints.join(", ")}]` : ""}`;
}
