/**
 * Webhook routes mounted among the rest of an app: after a body parser on
 * Express (it verifies a raw Buffer, and refuses to guess the bytes of
 * parsed JSON), and behind idempotency middleware for the whole app on
 * Fastify and Hono, which leaves the webhook route alone. Real servers on
 * loopback, real PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterAll, describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as ho from "../src/adapters/hono.ts";
import type { WebhookEvent } from "../src/runtime/webhook-route.ts";
import { sign, tenant, toSignal, verifyWith } from "./support/apps/durable-apps.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";
import { listenOnLoopback as listen } from "./support/loopback.ts";

const t = useTestDatabase();

describe("webhook routes among the rest of an app", () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
  });
  const signed = (text: string, key?: string): [string, string][] => [
    ["Content-Type", "application/json"],
    ["X-Psp-Signature", sign(text)],
    ...(key ? [["Idempotency-Key", key] as [string, string]] : []),
  ];
  const options = <Req>(header: (req: Req, name: string) => string | undefined) => ({
    verify: (e: WebhookEvent<Req>) => verifyWith((n) => header(e.request, n))(e),
    signal: toSignal,
  });

  it("Express: after express.raw() it verifies that Buffer; after express.json() it refuses to guess the bytes", async () => {
    const app = express();
    const opts = options((req: express.Request, n) => req.get(n));
    app.post("/raw", express.raw({ type: "*/*" }), ex.webhook(t.engine, opts));
    app.post("/parsed", express.json(), ex.webhook(t.engine, opts));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ message: error.message });
    });
    const running = await listen(http.createServer(app));
    closers.push(() => running.close());
    const text = JSON.stringify({ type: "ping" });
    const raw = await send(running.url, { path: "/raw", headers: signed(text), body: text });
    expect({ status: raw.status, json: raw.json }).toEqual({ status: 200, json: { received: true, ignored: true } });
    const parsed = await send(running.url, { path: "/parsed", headers: signed(text), body: text });
    expect(parsed.status).toBe(500);
    expect((parsed.json as { message: string }).message).toMatch(/no body parser before webhook/);
  });

  it("Fastify and Hono: idempotency middleware for the whole app leaves the webhook route alone", async () => {
    const fastify = Fastify();
    await fastify.register(fa.idempotency(t.engine, { tenant }));
    await fastify.register(
      fa.webhook(t.engine, {
        url: "/webhooks/psp",
        ...options((req: { headers: Record<string, unknown> }, n) => req.headers[n] as string),
      }),
    );
    await fastify.listen({ port: 0, host: "127.0.0.1" });
    closers.push(() => fastify.close());
    const hono = new Hono();
    hono.use("*", ho.idempotency(t.engine, { tenant }));
    hono.post(
      "/webhooks/psp",
      ho.webhook(
        t.engine,
        options((c: { req: { header(n: string): string | undefined } }, n) => c.req.header(n)),
      ),
    );
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: hono.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    const urls = [
      `http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}`,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ];
    for (const url of urls) {
      const key = `wh-${randomUUID()}`;
      const text = JSON.stringify({ type: "ping" });
      const answer = await send(url, { path: "/webhooks/psp", headers: signed(text, key), body: text });
      expect({ status: answer.status, json: answer.json }).toEqual({
        status: 200,
        json: { received: true, ignored: true },
      });
      // Not claimed as an idempotent request: no record under the header's key.
      expect(await t.engine.inspect("t1", key)).toBeNull();
    }
  });
});
