/**
 * HTTP replay of a stored response (framing headers, content coding, media
 * type in the fingerprint), on each adapter with the compression middleware
 * a user of that framework mounts: `compression` on Express,
 * `@fastify/compress` on Fastify, Hono's `compress`. Each is mounted outside
 * idempo (it compresses what idempo sends) and inside it (idempo stores
 * what it compressed). A replay never sends a content coding the replaying
 * request does not accept, and keeps `Vary`; framing is recomputed on every
 * answer; a CSV answer replays with its charset; a request of another media
 * type never replays a JSON request's answer; 204 and 304 replay with no
 * body on a connection that stays usable. Real servers on loopback, real
 * PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import fastifyCompress from "@fastify/compress";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine } from "@idempo/core";
import { workflow } from "@idempo/core";
import compression from "compression";
import express from "express";
import type { FastifyInstance } from "fastify";
import Fastify from "fastify";
import type { Context } from "hono";
import { Hono } from "hono";
import { compress } from "hono/compress";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as ho from "../src/adapters/hono.ts";
import type { Request, Sent } from "./support/client.ts";
import { send, sendH2 } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const tenant = () => "t1";

/** Handler runs, by tag: a replay must run nothing. */
const ran = new Map<string, number>();
const count = (tag: string) => ran.set(tag, (ran.get(tag) ?? 0) + 1);
const runs = (tag: string) => ran.get(tag) ?? 0;

/** A JSON report well above every middleware's compression threshold (1 KiB), non-ASCII included. */
function report(tag: string): string {
  const rows = Array.from({ length: 60 }, (_, i) => ({ i, city: "Zürich", name: "José Łódź", note: "ok ✓" }));
  return JSON.stringify({ tag, rows });
}
const JSON_TYPE = "application/json; charset=utf-8";
const CSV_TYPE = "text/csv; charset=utf-8";
const CSV = "name,city\r\nJosé,Zürich\r\nŁukasz,Kraków\r\n😀,東京\r\n";
const MANUAL = "length set by hand: ✓";

const chargeInput = z.object({ amountCents: z.number().int().positive() });
const charge = workflow("br33_charge")
  .input(chargeInput)
  .phase("charge", ({ key }) => {
    count(`run:${key}`);
    return { chargeId: `ch_${randomUUID().slice(0, 8)}` };
  })
  .respond(({ state }) => ({ status: 201, body: { chargeId: state.chargeId } }));

interface App {
  readonly url: string;
  close(): Promise<void>;
}

const tagOf = (body: unknown): string => {
  if (body !== null && typeof body === "object" && !Buffer.isBuffer(body))
    return String((body as { tag?: unknown }).tag);
  return `raw:${Buffer.isBuffer(body) ? body.toString("utf8") : String(body)}`;
};

async function listenNode(server: http.Server): Promise<App> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Start = (engine: Engine, options: { http2?: boolean }) => Promise<App>;

const harnesses: Record<string, { start: Start; http2: boolean }> = {
  express: {
    http2: false,
    async start(engine) {
      const app = express();
      const wrap = () => ex.idempotency(engine, { tenant });
      const answerReport = (req: express.Request, res: express.Response) => {
        const tag = tagOf(req.body);
        count(tag);
        res.status(201).type(JSON_TYPE).send(report(tag));
      };
      // Inside: idempo stores what compression wrote. Outside: compression encodes what idempo sends.
      app.post("/inside/report", wrap(), compression(), answerReport);
      app.post("/outside/report", compression(), wrap(), answerReport);
      app.post("/csv", wrap(), (req, res) => {
        count(tagOf(req.body));
        res.status(200).set("content-type", CSV_TYPE).send(CSV);
      });
      app.post("/manual-length", wrap(), (req, res) => {
        count(tagOf(req.body));
        res.status(200).set("content-type", "text/plain; charset=utf-8");
        res.setHeader("Content-Length", Buffer.byteLength(MANUAL));
        res.end(MANUAL);
      });
      app.post("/no-content", wrap(), (req, res) => {
        count(tagOf(req.body));
        res.status(204).end();
      });
      app.post("/not-modified", wrap(), (req, res) => {
        count(tagOf(req.body));
        res.status(304).set("etag", '"v1"').end();
      });
      app.post("/amounts", wrap(), (req, res) => {
        count(`run:${req.get("idempotency-key")}`);
        res.status(201).json({ received: req.body });
      });
      app.post("/charges", ex.idempotent(engine, charge, { tenant, input: (req) => req.body }));
      return listenNode(http.createServer(app));
    },
  },
  fastify: {
    http2: true,
    async start(engine, options) {
      // One type for both: the routes below do not depend on the transport.
      const app = (options.http2 ? Fastify({ http2: true }) : Fastify()) as unknown as FastifyInstance;
      // Global: its onSend hook runs after idempo's, so it encodes what idempo sends (outside).
      await app.register(fastifyCompress, { global: true });
      await app.register(fa.idempotency(engine, { tenant }));
      app.post("/outside/report", async (request, reply) => {
        const tag = tagOf(request.body);
        count(tag);
        return reply.code(201).type(JSON_TYPE).send(report(tag));
      });
      // Inside: the handler compresses its own answer, and idempo stores the encoded bytes.
      app.post("/inside/report", async (request, reply) => {
        const tag = tagOf(request.body);
        count(tag);
        reply.code(201).type(JSON_TYPE);
        return reply.compress(report(tag));
      });
      app.post("/csv", async (request, reply) => {
        count(tagOf(request.body));
        return reply.code(200).type(CSV_TYPE).send(CSV);
      });
      app.post("/manual-length", async (request, reply) => {
        count(tagOf(request.body));
        return reply
          .code(200)
          .type("text/plain; charset=utf-8")
          .header("content-length", Buffer.byteLength(MANUAL))
          .send(MANUAL);
      });
      app.post("/no-content", async (request, reply) => {
        count(tagOf(request.body));
        return reply.code(204).send();
      });
      app.post("/not-modified", async (request, reply) => {
        count(tagOf(request.body));
        return reply.code(304).header("etag", '"v1"').send();
      });
      app.post("/amounts", async (request, reply) => {
        count(`run:${request.headers["idempotency-key"]}`);
        return reply.code(201).send({ received: request.body });
      });
      app.post("/charges", fa.idempotent(engine, charge, { tenant, input: (request) => request.body }));
      await app.listen({ port: 0, host: "127.0.0.1" });
      return {
        url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
        close: () => app.close(),
      };
    },
  },
  hono: {
    http2: true,
    async start(engine, options) {
      const app = new Hono();
      const wrap = () => ho.idempotency(engine, { tenant });
      const bodyOf = async (c: Context) =>
        (c.req.header("content-type") ?? "").startsWith("application/json")
          ? c.req.json()
          : Buffer.from(await c.req.text());
      const answerReport = async (c: Context) => {
        const tag = tagOf(await bodyOf(c));
        count(tag);
        return c.body(report(tag), 201, { "content-type": JSON_TYPE });
      };
      app.post("/inside/report", wrap(), compress(), answerReport);
      app.post("/outside/report", compress(), wrap(), answerReport);
      app.post("/csv", wrap(), async (c) => {
        count(tagOf(await bodyOf(c)));
        return c.body(CSV, 200, { "content-type": CSV_TYPE });
      });
      app.post("/manual-length", wrap(), async (c) => {
        count(tagOf(await bodyOf(c)));
        return c.body(MANUAL, 200, {
          "content-type": "text/plain; charset=utf-8",
          "content-length": String(Buffer.byteLength(MANUAL)),
        });
      });
      app.post("/no-content", wrap(), async (c) => {
        count(tagOf(await bodyOf(c)));
        return c.body(null, 204);
      });
      app.post("/not-modified", wrap(), async (c) => {
        count(tagOf(await bodyOf(c)));
        return c.body(null, 304, { etag: '"v1"' });
      });
      app.post("/amounts", wrap(), async (c) => {
        const body = await bodyOf(c);
        count(`run:${c.req.header("idempotency-key")}`);
        return c.json({ received: Buffer.isBuffer(body) ? body.toString("utf8") : body }, 201);
      });
      // Parsed only as the JSON it declares itself to be: any other media type fails the schema.
      app.post("/charges", ho.idempotent(engine, charge, { tenant, input: (c) => bodyOf(c) }));
      const server = await new Promise<ServerType>((resolve) => {
        const s = serve(
          {
            fetch: app.fetch,
            port: 0,
            hostname: "127.0.0.1",
            ...(options.http2 ? { createServer: http2.createServer } : {}),
          },
          () => resolve(s),
        );
      });
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () =>
          new Promise((resolve) => {
            if ("closeAllConnections" in server) server.closeAllConnections();
            server.close(() => resolve());
          }),
      };
    },
  },
};

/** The body after undoing the response's content coding (each one, last applied first). */
function decoded(res: Sent): Buffer {
  const codings = String(res.headers["content-encoding"] ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
  let body = res.body;
  for (const coding of codings.reverse()) {
    if (coding === "gzip" || coding === "x-gzip") body = gunzipSync(body);
    else if (coding === "br") body = brotliDecompressSync(body);
    else if (coding === "deflate") body = inflateSync(body);
    else throw new Error(`the test cannot decode '${coding}'`);
  }
  return body;
}

/** The content codings of a response, identity left out. */
const codingsOf = (res: Sent) =>
  String(res.headers["content-encoding"] ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");

const varyNames = (res: Sent) =>
  String(res.headers.vary ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== "");

/** Framing is the server's: a declared length equals the bytes sent, never next to chunking. */
function expectFramed(res: Sent): void {
  const length = res.headers["content-length"];
  if (length !== undefined) {
    expect(Number(length)).toBe(res.body.length);
    expect(res.headers["transfer-encoding"]).toBeUndefined();
  }
}

/** Two requests on one kept-alive socket: the second must be answered on the same connection. */
async function onOneSocket(url: string, first: Request, second: Request): Promise<[Sent, Sent, boolean]> {
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

describe.each(Object.keys(harnesses))("%s", (name) => {
  const harness = harnesses[name] as { start: Start; http2: boolean };
  let app: App;
  beforeAll(async () => {
    app = await harness.start(t.engine, {});
  });
  afterAll(async () => {
    await app?.close();
  });

  const fresh = () => randomUUID().slice(0, 8);
  const post = (path: string, key: string, json: unknown, acceptEncoding?: string) =>
    send(app.url, {
      path,
      headers: [
        ["Idempotency-Key", key],
        ...(acceptEncoding === undefined ? [] : [["Accept-Encoding", acceptEncoding] as [string, string]]),
      ],
      json,
    });

  describe.each(["inside", "outside"])("compression mounted %s idempo", (where) => {
    it("a replay never sends a content coding the request does not accept, and keeps Vary: Accept-Encoding", async () => {
      const key = `k1-${fresh()}`;
      const tag = `report-${where}-${key}`;
      const path = `/${where}/report`;
      const body = { tag };
      const first = await post(path, key, body, "gzip");
      expect(first.status).toBe(201);
      expect(codingsOf(first)).toEqual(["gzip"]);
      const content = decoded(first);
      expect(JSON.parse(content.toString("utf8"))).toMatchObject({ tag });
      expectFramed(first);

      const cases: [string | undefined, readonly string[]][] = [
        ["gzip", ["gzip"]],
        ["identity", []],
        [undefined, []],
        ["gzip;q=0, identity", []],
        ["br", ["br"]],
        ["deflate;q=0.5, gzip;q=0", ["deflate"]],
      ];
      const seen = [];
      const expected = [];
      for (const [accept, allowed] of cases) {
        const replay = await post(path, key, body, accept);
        // What the same request gets from the app when it runs: an encoder outside sets Vary (or not) alike.
        const fresh =
          where === "outside"
            ? await post(path, `fresh-${key}-${seen.length}`, { tag: `fresh-${tag}` }, accept)
            : undefined;
        seen.push({
          accept,
          status: replay.status,
          replayed: replay.headers["idempotent-replayed"],
          // Each coding sent is one this request accepts (an encoder outside may pick any of them, or none).
          accepted: codingsOf(replay).every((coding) => allowed.includes(coding)),
          sameContent: decoded(replay).equals(content),
          type: replay.headers["content-type"],
          varyAcceptEncoding: varyNames(replay).includes("accept-encoding"),
        });
        expected.push({
          accept,
          status: 201,
          replayed: "true",
          accepted: true,
          sameContent: true,
          type: JSON_TYPE,
          varyAcceptEncoding: fresh ? varyNames(fresh).includes("accept-encoding") : true,
        });
        expectFramed(replay);
      }
      expect(seen).toEqual(expected);
      expect(runs(tag)).toBe(1);
    });
  });

  it("a CSV answer replays with the same Content-Type, charset included, and the same bytes", async () => {
    const key = `k2-${fresh()}`;
    const first = await post("/csv", key, { tag: key });
    const replay = await post("/csv", key, { tag: key });
    expect(first.status).toBe(200);
    expect(first.body.toString("utf8")).toBe(CSV);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.headers["content-type"]).toBe(CSV_TYPE);
    expect(first.headers["content-type"]).toBe(CSV_TYPE);
    expect(replay.body.equals(first.body)).toBe(true);
    expectFramed(first);
    expectFramed(replay);
    expect(runs(key)).toBe(1);
  });

  it("a Content-Length set by hand is never stored: each answer declares the bytes it sends", async () => {
    const key = `k-len-${fresh()}`;
    const first = await post("/manual-length", key, { tag: key });
    const replay = await post("/manual-length", key, { tag: key });
    for (const res of [first, replay]) {
      expect(res.status).toBe(200);
      expect(res.body.toString("utf8")).toBe(MANUAL);
      expectFramed(res);
    }
    expect(replay.headers["idempotent-replayed"]).toBe("true");
  });

  it("the same bytes under another media type never replay the JSON request's answer", async () => {
    const text = JSON.stringify({ amountCents: 500 });
    const keys: string[] = [];
    for (const path of ["/amounts", "/charges"]) {
      const key = `k3-${fresh()}`;
      keys.push(key);
      const first = await send(app.url, {
        path,
        headers: [
          ["Idempotency-Key", key],
          ["Content-Type", "application/json"],
        ],
        body: text,
      });
      expect({ path, status: first.status }).toEqual({ path, status: 201 });
      for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {
        const other = await send(app.url, {
          path,
          headers: [
            ["Idempotency-Key", key],
            ["Content-Type", type],
          ],
          body: text,
        });
        expect({ path, type, replayed: other.headers["idempotent-replayed"] }).toEqual({
          path,
          type,
          replayed: undefined,
        });
        expect({ path, type, refused: [400, 415, 422].includes(other.status) }).toEqual({ path, type, refused: true });
      }
    }
    // Nothing ran for the other media types: one run of each route.
    expect(keys.map((key) => runs(`run:${key}`))).toEqual([1, 1]);
  });

  it("204 and 304 replay with no body and no positive Content-Length, and the kept-alive socket stays usable", async () => {
    for (const path of ["/no-content", "/not-modified"]) {
      const key = `k4-${fresh()}`;
      const request: Request = { path, headers: [["Idempotency-Key", key]], json: { tag: key } };
      const [first, replay, reused] = await onOneSocket(app.url, request, request);
      const [again, next, reusedAgain] = await onOneSocket(app.url, request, {
        path: "/csv",
        headers: [["Idempotency-Key", `after-${key}`]],
        json: { tag: `after-${key}` },
      });
      const status = path === "/no-content" ? 204 : 304;
      for (const res of [first, replay, again]) {
        expect({ path, status: res.status, length: res.body.length }).toEqual({ path, status, length: 0 });
        expect(Number(res.headers["content-length"] ?? 0)).toBe(0);
      }
      expect(replay.headers["idempotent-replayed"]).toBe("true");
      expect({ path, reused, reusedAgain, next: next.status }).toEqual({
        path,
        reused: true,
        reusedAgain: true,
        next: 200,
      });
      expect(runs(key)).toBe(1);
    }
  });

  it.runIf(harness.http2)("204 and 304 replay over HTTP/2 with no body", async () => {
    const h2 = await harness.start(t.engine, { http2: true });
    try {
      for (const path of ["/no-content", "/not-modified"]) {
        const key = `k4h2-${fresh()}`;
        const request: Request = { path, headers: [["idempotency-key", key]], json: { tag: key } };
        const first = await sendH2(h2.url, request);
        const replay = await sendH2(h2.url, request);
        const status = path === "/no-content" ? 204 : 304;
        for (const res of [first, replay]) {
          expect({ path, status: res.status, length: res.body.length }).toEqual({ path, status, length: 0 });
          expect(Number(res.headers["content-length"] ?? 0)).toBe(0);
        }
        expect(replay.headers["idempotent-replayed"]).toBe("true");
        expect(runs(key)).toBe(1);
      }
    } finally {
      await h2.close();
    }
  });
});
