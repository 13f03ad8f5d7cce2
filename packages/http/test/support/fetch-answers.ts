/** How the Fetch-based test apps (Hono, the Fetch handler) read a test request's body and write a test answer. */
import type { TestResponse } from "./routes.ts";

/** JSON parsed, octet-stream as a Buffer, anything else undefined. */
export async function parsedFetchBody(
  type: string | undefined | null,
  body: { json(): Promise<unknown>; arrayBuffer(): Promise<ArrayBuffer> },
): Promise<unknown> {
  const media = type ?? "";
  if (media.startsWith("application/json")) return body.json();
  if (media.startsWith("application/octet-stream")) return Buffer.from(await body.arrayBuffer());
  return undefined;
}

/** A test handler's answer as a Fetch `Response`; `chunks` are streamed with a pause between them. */
export function answerResponse(answer: TestResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers ?? {})) {
    for (const v of typeof value === "string" ? [value] : value) headers.append(name, v);
  }
  let body: ConstructorParameters<typeof Response>[0] = null;
  if (answer.json !== undefined) {
    headers.set("content-type", "application/json");
    body = JSON.stringify(answer.json);
  } else if (answer.bytes !== undefined) body = new Uint8Array(answer.bytes);
  else if (answer.text !== undefined) body = answer.text;
  else if (answer.chunks !== undefined) {
    const chunks = [...answer.chunks];
    body = new ReadableStream({
      async pull(controller) {
        const chunk = chunks.shift();
        if (chunk === undefined) controller.close();
        else {
          await new Promise((r) => setTimeout(r, 5));
          controller.enqueue(new TextEncoder().encode(chunk));
        }
      },
    });
  }
  return new Response(body, { status: answer.status, headers });
}
