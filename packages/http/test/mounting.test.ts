/**
 * Scoping (operation): middleware mounted for a whole app must not claim
 * the keys of workflow routes a second time, and records the route the
 * request goes to.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { workflow } from "@idempo/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterAll, describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as ho from "../src/adapters/hono.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

const echo = workflow("echo").respond(({ input }) => ({ status: 201, body: { echoed: input } }));
const headers = (key: string) =>
  [
    ["Idempotency-Key", key],
    ["Authorization", "Bearer t1"],
  ] as const;
const listen = async (server: http.Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};
const workflowOf = async (key: string) => (await t.engine.inspect("t1", key))?.workflow;

describe("mounted for the whole app", () => {
  it("Hono: leaves workflow routes to their workflow and records the wrapped route's pattern", async () => {
    const app = new Hono();
    app.use("/v1/*", ho.idempotency(t.engine, { tenant: () => "t1" }));
    app.post("/v1/orders/:id/notes", (c) => c.json({ id: c.req.param("id") }, 201));
    app.post("/v1/echo", ho.idempotent(t.engine, echo, { tenant: () => "t1", input: (c) => c.req.json() }));
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise((resolve) => server.once("listening", resolve));
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const flowKey = `k-${crypto.randomUUID()}`;
    const first = await send(url, { path: "/v1/echo", headers: headers(flowKey), json: { a: 1 } });
    expect(first.status).toBe(201);
    expect((await send(url, { path: "/v1/echo", headers: headers(flowKey), json: { a: 1 } })).headers).toMatchObject({
      "idempotent-replayed": "true",
    });
    expect(await workflowOf(flowKey)).toBe("echo");

    const wrapKey = `k-${crypto.randomUUID()}`;
    expect((await send(url, { path: "/v1/orders/o7/notes", headers: headers(wrapKey), json: {} })).status).toBe(201);
    const record = await t.engine.inspect("t1", wrapKey);
    expect(record?.workflow).toBe("http POST /v1/orders/:id/notes");
    expect(record?.input).toMatchObject({ params: { id: "o7" } });
    const other = await send(url, { path: "/v1/orders/o8/notes", headers: headers(wrapKey), json: {} });
    expect(other.status).toBe(422);
  });

  it("Fastify: the plugin leaves workflow routes to their workflow", async () => {
    const app = Fastify();
    await app.register(fa.idempotency(t.engine, { tenant: () => "t1" }));
    app.post("/echo", fa.idempotent(t.engine, echo, { tenant: () => "t1", input: (req) => req.body }));
    await app.listen({ port: 0, host: "127.0.0.1" });
    closers.push(() => app.close());
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const key = `k-${crypto.randomUUID()}`;
    expect((await send(url, { path: "/echo", headers: headers(key), json: { a: 1 } })).status).toBe(201);
    expect(await workflowOf(key)).toBe("echo");
  });

  it("Express: fingerprints what a body parser mounted first produced, and refuses app-wide use before a workflow route", async () => {
    const app = express();
    app.post("/parsed", express.json(), ex.idempotency(t.engine, { tenant: () => "t1" }), (req, res) => {
      res.status(201).json({ got: req.body });
    });
    app.use("/v1", ex.idempotency(t.engine, { tenant: () => "t1" }));
    app.post(
      "/v1/echo",
      express.json(),
      ex.idempotent(t.engine, echo, { tenant: () => "t1", input: (req) => req.body }),
    );
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ message: error.message });
    });
    const url = await listen(http.createServer(app));

    const key = `k-${crypto.randomUUID()}`;
    const first = await send(url, { path: "/parsed", headers: headers(key), json: { b: 2, a: 1 } });
    expect(first.json).toEqual({ got: { b: 2, a: 1 } });
    const again = await send(url, { path: "/parsed", headers: headers(key), json: { a: 1, b: 2.0 } });
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect((await send(url, { path: "/parsed", headers: headers(key), json: { a: 2 } })).status).toBe(422);

    const refused = await send(url, { path: "/v1/echo", headers: headers(`k-${crypto.randomUUID()}`), json: {} });
    expect(refused.status).toBe(500);
    expect((refused.json as { message: string }).message).toMatch(/instead of app-wide/);
  });
});
