/**
 * A plain HTTP/1.1 client over node:http, so tests control header lines
 * exactly: names keep their case, repeated lines stay separate.
 */
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";

export interface Sent {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  readonly json: unknown;
  /** SHA-256 hex of the body. */
  readonly sha256: string;
  readonly ms: number;
}

export interface Request {
  readonly method?: string;
  readonly path: string;
  /** Header lines in order; a name may repeat. */
  readonly headers?: readonly (readonly [string, string])[];
  /** A JSON value, or raw bytes / text sent as is. */
  readonly json?: unknown;
  readonly body?: Buffer | string;
  /** Send the body chunked, without a Content-Length. */
  readonly chunked?: boolean;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function parse(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

function finish(status: number, headers: IncomingHttpHeaders, body: Buffer, started: number): Sent {
  return {
    status,
    headers,
    body,
    json: parse(body),
    sha256: createHash("sha256").update(body).digest("hex"),
    ms: Date.now() - started,
  };
}

function payload(req: Request): { bytes: Buffer | undefined; lines: [string, string][] } {
  const lines = (req.headers ?? []).map(([n, v]) => [n, v] as [string, string]);
  let bytes: Buffer | undefined;
  if (req.json !== undefined) {
    bytes = Buffer.from(typeof req.json === "string" ? req.json : JSON.stringify(req.json), "utf8");
    if (!lines.some(([n]) => n.toLowerCase() === "content-type")) lines.push(["Content-Type", "application/json"]);
  } else if (req.body !== undefined) {
    bytes = typeof req.body === "string" ? Buffer.from(req.body, "utf8") : req.body;
  }
  if (bytes) lines.push(req.chunked ? ["Transfer-Encoding", "chunked"] : ["Content-Length", String(bytes.length)]);
  return { bytes, lines };
}

/** Send one request; resolves with the whole response. */
export function send(baseUrl: string, req: Request): Promise<Sent> {
  const url = new URL(req.path, baseUrl);
  const { bytes, lines } = payload(req);
  // Raw header arrays get no Host header added for them.
  lines.unshift(["Host", url.host]);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const r = http.request(
      url,
      { method: req.method ?? "POST", agent, headers: lines.flat() as unknown as http.OutgoingHttpHeaders },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(finish(res.statusCode ?? 0, res.headers, Buffer.concat(chunks), started)));
        res.on("error", reject);
      },
    );
    r.on("error", reject);
    r.end(bytes);
  });
}

/** Send raw bytes on a fresh socket (for header values node:http refuses to send); resolves with the status. */
export function sendRaw(baseUrl: string, head: string): Promise<number> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => socket.end(Buffer.from(head, "latin1")));
    let text = "";
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
  });
}

/** Send one request over cleartext HTTP/2 (header names are lower case on the wire there). */
export function sendH2(baseUrl: string, req: Request): Promise<Sent> {
  const { bytes, lines } = payload(req);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const headers: http2.OutgoingHttpHeaders = { ":method": req.method ?? "POST", ":path": req.path };
    for (const [n, v] of lines) if (n.toLowerCase() !== "content-length") headers[n.toLowerCase()] = v;
    const stream = session.request(headers);
    const chunks: Buffer[] = [];
    let status = 0;
    let responseHeaders: IncomingHttpHeaders = {};
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      responseHeaders = h as IncomingHttpHeaders;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      session.close();
      resolve(finish(status, responseHeaders, Buffer.concat(chunks), started));
    });
    stream.on("error", reject);
    stream.end(bytes);
  });
}

/** Two requests on one kept-alive socket: the second must be answered on the same connection. */
export async function onOneSocket(url: string, first: Request, second: Request): Promise<[Sent, Sent, boolean]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const a = await sendWith(agent, url, first);
    const b = await sendWith(agent, url, second);
    return [a.sent, b.sent, b.reused];
  } finally {
    agent.destroy();
  }
}

function sendWith(agent: http.Agent, baseUrl: string, req: Request): Promise<{ sent: Sent; reused: boolean }> {
  const url = new URL(req.path, baseUrl);
  const lines: [string, string][] = [
    ["Host", url.host],
    ...(req.headers ?? []).map(([n, v]) => [n, v] as [string, string]),
  ];
  const bytes = req.json === undefined ? undefined : Buffer.from(JSON.stringify(req.json), "utf8");
  if (bytes) lines.push(["Content-Type", "application/json"], ["Content-Length", String(bytes.length)]);
  return new Promise((resolve, reject) => {
    const r = http.request(
      url,
      { method: "POST", agent, headers: lines.flat() as unknown as http.OutgoingHttpHeaders },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const body = Buffer.concat(chunks);
          let json: unknown;
          try {
            json = JSON.parse(body.toString("utf8"));
          } catch {
            json = undefined;
          }
          resolve({
            sent: { status: res.statusCode ?? 0, headers: res.headers, body, json, sha256: "", ms: 0 },
            reused: r.reusedSocket,
          });
        });
        res.on("error", reject);
      },
    );
    r.on("error", reject);
    r.end(bytes);
  });
}
