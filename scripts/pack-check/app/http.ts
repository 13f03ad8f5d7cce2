/**
 * @idempo/http from the installed tarball on each framework the user brings:
 * the checkout route on Express, Fastify and Hono, and as a standard
 * Request/Response handler (`@idempo/http/fetch`, a Next.js route handler's
 * shape), one request with an Idempotency-Key and its replay, on the
 * database at DATABASE_URL.
 */
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { createEngine } from "@idempo/core";
import { idempotent as onExpress } from "@idempo/http/express";
import { idempotent as onFastify } from "@idempo/http/fastify";
import { idempotent as onFetch, idempotency as wrapFetch } from "@idempo/http/fetch";
import { idempotent as onHono } from "@idempo/http/hono";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { CREATE_ORDERS, checkout, type Database, FakePayments } from "./checkout.js";

const connectionString = process.env.DATABASE_URL;
assert.ok(connectionString, "DATABASE_URL is required");
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString, max: 4 }) }) });
const engine = createEngine({ db });

type Send = (key: string, body: unknown) => Promise<Response>;

/** One request with a key, then its replay: same status and body, marked replayed, one charge. */
async function keyAndReplay(framework: string, payments: FakePayments, send: Send): Promise<void> {
  const key = `http-${framework}-1`;
  const body = { cartId: `cart-${framework}`, amountCents: 1500 };
  const first = await send(key, body);
  const firstBody = await first.text();
  assert.equal(first.status, 201, `${framework}: first request: ${firstBody}`);
  assert.equal(first.headers.get("idempotent-replayed"), null, `${framework}: the first answer is not a replay`);
  const replay = await send(key, body);
  assert.equal(replay.status, 201, framework);
  assert.equal(replay.headers.get("idempotent-replayed"), "true", `${framework}: the second answer is the replay`);
  assert.equal(await replay.text(), firstBody, `${framework}: the replay has the first body`);
  assert.equal(payments.charges.size, 1, `${framework}: one charge`);
  console.log(`ok http ${framework}: ${first.status} then replayed ${replay.status}, one charge`);
}

function post(base: string): Send {
  return (key, body) =>
    fetch(`${base}/charges`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(body),
    });
}

async function onExpressApp(): Promise<void> {
  const payments = new FakePayments();
  const app = express();
  app.post(
    "/charges",
    express.json(),
    onExpress(
      engine,
      checkout((key) => payments.charge(key)),
      { tenant: () => "acme", input: (req) => req.body },
    ),
  );
  const server = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  try {
    await keyAndReplay("express", payments, post(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function onFastifyApp(): Promise<void> {
  const payments = new FakePayments();
  const app = Fastify();
  app.post(
    "/charges",
    onFastify(
      engine,
      checkout((key) => payments.charge(key)),
      {
        tenant: () => "acme",
        input: (request) => request.body as { cartId: string; amountCents: number },
      },
    ),
  );
  const address = await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    await keyAndReplay("fastify", payments, post(address));
  } finally {
    await app.close();
  }
}

async function onHonoApp(): Promise<void> {
  const payments = new FakePayments();
  const app = new Hono();
  app.post(
    "/charges",
    onHono(
      engine,
      checkout((key) => payments.charge(key)),
      { tenant: () => "acme", input: (c) => c.req.json() },
    ),
  );
  // Hono apps are fetch handlers: the request goes through app.request, as on any runtime.
  await keyAndReplay("hono", payments, (key, body) =>
    Promise.resolve(
      app.request("/charges", {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify(body),
      }),
    ),
  );
}

/** Called with a Request, as Next.js, Bun and Deno call a route handler. */
async function onFetchHandler(): Promise<void> {
  const payments = new FakePayments();
  const POST = onFetch(
    engine,
    checkout((key) => payments.charge(key)),
    { tenant: () => "acme", input: (request) => request.json() as Promise<{ cartId: string; amountCents: number }> },
  );
  const request = (key: string, body: unknown) =>
    new Request("http://localhost/api/checkout", {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(body),
    });
  await keyAndReplay("fetch", payments, (key, body) => POST(request(key, body)));
  // A wrapped handler: the second call replays the first answer without running it.
  let ran = 0;
  const wrapped = wrapFetch(engine, { tenant: () => "acme" }, async (_request, run) => {
    ran++;
    return Response.json({ key: run?.key }, { status: 201 });
  });
  const first = await wrapped(request("http-fetch-wrapped", { n: 1 }));
  const replay = await wrapped(request("http-fetch-wrapped", { n: 1 }));
  assert.equal(first.status, 201);
  assert.equal(replay.headers.get("idempotent-replayed"), "true");
  assert.deepEqual(await replay.json(), { key: "http-fetch-wrapped" });
  assert.equal(ran, 1, "fetch: the wrapped handler ran once");
  console.log("ok http fetch (wrapped): 201 then replayed, the handler ran once");
}

try {
  await engine.migrate();
  await sql.raw(CREATE_ORDERS).execute(db);
  await onExpressApp();
  await onFastifyApp();
  await onHonoApp();
  await onFetchHandler();
} finally {
  await db.destroy();
}
