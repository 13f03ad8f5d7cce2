/**
 * The apps of the replay test (BR-33) on each adapter, with the compression
 * middleware a user of that framework mounts, outside idempo and inside it,
 * and handlers that answer CSV, set Content-Length by hand, answer 204 and
 * 304, and take a body of any media type (a wrapped route and a workflow
 * route). Handlers count their runs by tag or key.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
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
import Negotiator from "negotiator";
import { z } from "zod";
import * as ex from "../../../src/adapters/express.ts";
import * as fa from "../../../src/adapters/fastify.ts";
import * as fe from "../../../src/adapters/fetch.ts";
import * as ho from "../../../src/adapters/hono.ts";
import { fetchRouter, serveFetch } from "../fetch-server.ts";

const tenant = () => "t1";

/** Handler runs, by tag: a replay must run nothing. */
const ran = new Map<string, number>();
const count = (tag: string) => ran.set(tag, (ran.get(tag) ?? 0) + 1);
export const runs = (tag: string) => ran.get(tag) ?? 0;

/** A JSON report well above every middleware's compression threshold (1 KiB), non-ASCII included. */
function report(tag: string): string {
  const rows = Array.from({ length: 60 }, (_, i) => ({ i, city: "Zürich", name: "José Łódź", note: "ok ✓" }));
  return JSON.stringify({ tag, rows });
}
export const JSON_TYPE = "application/json; charset=utf-8";
export const CSV_TYPE = "text/csv; charset=utf-8";
export const CSV = "name,city\r\nJosé,Zürich\r\nŁukasz,Kraków\r\n😀,東京\r\n";
export const MANUAL = "length set by hand: ✓";

const chargeInput = z.object({ amountCents: z.number().int().positive() });
const charge = workflow("br33_charge")
  .input(chargeInput)
  .phase("charge", ({ key }) => {
    count(`run:${key}`);
    return { chargeId: `ch_${randomUUID().slice(0, 8)}` };
  })
  .respond(({ state }) => ({ status: 201, body: { chargeId: state.chargeId } }));

export interface App {
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

/** Whether a Fetch request accepts gzip (a q of 0 refuses it). */
const acceptsGzip = (request: Request) =>
  new Negotiator({ headers: { "accept-encoding": request.headers.get("accept-encoding") ?? "identity" } }).encoding([
    "gzip",
    "identity",
  ]) === "gzip";

/** Gzip a response's body for a request that accepts it, as a compression layer of a Fetch server would. */
async function gzipFor(request: Request, response: Response): Promise<Response> {
  const headers = new Headers(response.headers);
  headers.append("vary", "Accept-Encoding");
  if (!acceptsGzip(request) || response.body === null || headers.has("content-encoding")) {
    return new Response(response.body, { status: response.status, headers });
  }
  headers.set("content-encoding", "gzip");
  headers.delete("content-length");
  return new Response(gzipSync(Buffer.from(await response.arrayBuffer())), { status: response.status, headers });
}

export type Start = (engine: Engine, options: { http2?: boolean }) => Promise<App>;

export const harnesses: Record<string, { start: Start; http2: boolean }> = {
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
  fetch: {
    http2: true,
    async start(engine, options) {
      const wrap = (handler: (request: Request) => Promise<Response>) => fe.idempotency(engine, { tenant }, handler);
      const bodyOf = async (request: Request) =>
        (request.headers.get("content-type") ?? "").startsWith("application/json")
          ? request.json()
          : Buffer.from(await request.text());
      const answer = (status: number, body: string | null, headers: Record<string, string> = {}) =>
        new Response(body, { status, headers });
      const answerReport = async (request: Request) => {
        const tag = tagOf(await bodyOf(request));
        count(tag);
        return answer(201, report(tag), { "content-type": JSON_TYPE });
      };
      // Inside: the handler compresses its own answer. Outside: a compression layer encodes what idempo sends.
      const inside = wrap(async (request) => gzipFor(request, await answerReport(request)));
      const outside = wrap(answerReport);
      const counted = (status: number, body: string | null, headers?: Record<string, string>) =>
        wrap(async (request) => {
          count(tagOf(await bodyOf(request)));
          return answer(status, body, headers);
        });
      const routes = [
        { path: "/inside/report", handle: inside },
        { path: "/outside/report", handle: async (request: Request) => gzipFor(request, await outside(request)) },
        { path: "/csv", handle: counted(200, CSV, { "content-type": CSV_TYPE }) },
        {
          path: "/manual-length",
          handle: counted(200, MANUAL, {
            "content-type": "text/plain; charset=utf-8",
            "content-length": String(Buffer.byteLength(MANUAL)),
          }),
        },
        { path: "/no-content", handle: counted(204, null) },
        { path: "/not-modified", handle: counted(304, null, { etag: '"v1"' }) },
        {
          path: "/amounts",
          handle: wrap(async (request) => {
            const body = await bodyOf(request);
            count(`run:${request.headers.get("idempotency-key")}`);
            return Response.json({ received: Buffer.isBuffer(body) ? body.toString("utf8") : body }, { status: 201 });
          }),
        },
        { path: "/charges", handle: fe.idempotent(engine, charge, { tenant, input: bodyOf }) },
      ];
      return serveFetch(fetchRouter(routes.map((route) => ({ method: "POST", ...route }))), options);
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
