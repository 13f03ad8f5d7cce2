/**
 * Serves a Fetch handler (`(request: Request) => Promise<Response>`) on a
 * loopback port through node:http (or cleartext HTTP/2), with Node's own
 * `Request` and `Response`, the way a Fetch runtime does: header lines are
 * appended to one `Headers` (repeats joined with a comma), the body is
 * streamed, an error thrown by the handler becomes a plain 500.
 */
import http from "node:http";
import http2 from "node:http2";
import { Readable } from "node:stream";
import { listenOnLoopback } from "./loopback.ts";
import type { RunningApp } from "./routes.ts";

export type FetchHandler = (request: Request) => Promise<Response>;

type Incoming = http.IncomingMessage | http2.Http2ServerRequest;
type Outgoing = http.ServerResponse | http2.Http2ServerResponse;

function toRequest(req: Incoming): Request {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i] as string;
    if (!name.startsWith(":")) headers.append(name, req.rawHeaders[i + 1] as string);
  }
  const host = headers.get("host") ?? String(req.headers[":authority"] ?? "127.0.0.1");
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(`http://${host}${req.url}`, {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(req as Readable) as ReadableStream<Uint8Array>) : null,
    duplex: "half",
  } as RequestInit);
}

async function write(response: Response, req: Incoming, res: Outgoing): Promise<void> {
  res.statusCode = response.status;
  // A body left unread (a 413) is still on the wire: on HTTP/1.1 that connection cannot carry another request.
  if (!req.complete && req.httpVersionMajor === 1) res.setHeader("connection", "close");
  for (const [name, value] of response.headers) if (name !== "set-cookie") res.setHeader(name, value);
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) res.setHeader("set-cookie", cookies);
  if (response.body) for await (const chunk of response.body) (res as http.ServerResponse).write(chunk);
  res.end();
}

/** Start a server for `handle` on a free loopback port. */
export async function serveFetch(handle: FetchHandler, options: { http2?: boolean } = {}): Promise<RunningApp> {
  const listener = async (req: Incoming, res: Outgoing) => {
    let response: Response;
    try {
      response = await handle(toRequest(req));
    } catch {
      response = Response.json({ error: "internal" }, { status: 500 });
    }
    await write(response, req, res).catch(() => res.destroy());
  };
  const server = options.http2 ? http2.createServer(listener) : http.createServer(listener);
  return listenOnLoopback(server);
}

/** A router over Fetch handlers by method and path pattern (`/orders/:id`); 404 for anything else. */
export function fetchRouter(
  routes: readonly {
    method: string;
    path: string;
    handle: (request: Request, params: Record<string, string>) => Promise<Response>;
  }[],
): FetchHandler {
  const compiled = routes.map((route) => {
    const names: string[] = [];
    const source = route.path.replace(/:([a-z]+)/g, (_m, name: string) => {
      names.push(name);
      return "([^/]+)";
    });
    return { ...route, names, pattern: new RegExp(`^${source}$`) };
  });
  return async (request) => {
    const path = new URL(request.url).pathname;
    for (const route of compiled) {
      const match = route.method === request.method ? route.pattern.exec(path) : null;
      if (!match) continue;
      const params = Object.fromEntries(route.names.map((name, i) => [name, decodeURIComponent(match[i + 1] ?? "")]));
      return route.handle(request, params);
    }
    return Response.json({ error: "not found" }, { status: 404 });
  };
}
