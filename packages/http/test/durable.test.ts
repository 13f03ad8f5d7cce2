/**
 * Durable runs over HTTP, on each adapter: a workflow route whose run
 * suspends answers 202 with the accepted body, `Location` and
 * `Retry-After`; retries get 409 with the same hints until the run
 * completes, then its answer and replays. The webhook route verifies a
 * provider's signature over the raw body and turns the event into
 * `engine.signal`: 2xx for a delivered and for a duplicate signal, and for
 * one the run will never read; the problem table for the rest. Real servers on loopback, real PostgreSQL.
 */
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine, Workflow } from "@idempo/core";
import { workflow } from "@idempo/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as fe from "../src/adapters/fetch.ts";
import * as ho from "../src/adapters/hono.ts";
import { WebhookVerificationError } from "../src/problem/errors.ts";
import type { VerifiedWebhookEvent, WebhookEvent, WebhookSignal } from "../src/runtime/webhook-route.ts";
import type { Sent } from "./support/client.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";
import { fetchRouter, serveFetch } from "./support/fetch-server.ts";

const t = useTestDatabase();
const SECRET = "whsec_test";
const HOUR_MS = 3_600_000;

/** What the workflows did, by name: a run resumed after its wait must not run what came before again. */
const ran = new Map<string, number>();
const count = (what: string) => ran.set(what, (ran.get(what) ?? 0) + 1);
const runs = (what: string) => ran.get(what) ?? 0;

const orderInput = z.object({ orderId: z.string(), amountCents: z.number().int().positive() });

/** A card payment that needs the provider's 3-D Secure confirmation before it is captured. */
const payment = workflow("payment_3ds")
  .input(orderInput)
  .step("authorize", ({ input }) => {
    count(`authorize:${input.orderId}`);
    return { authorization: `au_${input.orderId}` };
  })
  .waitFor("confirmed", { timeoutMs: HOUR_MS, schema: z.object({ outcome: z.enum(["approved", "declined"]) }) })
  .step("capture", ({ input, state }) => {
    count(`capture:${input.orderId}`);
    return { capture: `cap_${state.authorization}`, outcome: state.confirmed.outcome };
  })
  .accepted(({ input, state }) => ({ orderId: input.orderId, status: "requires_confirmation", ...state }))
  .respond(({ input, state }) => ({
    status: 201,
    body: { orderId: input.orderId, capture: state.capture, outcome: state.outcome },
  }));

/** A cooling-off period of an hour before anything happens. */
const coolOff = workflow("cool_off")
  .input(orderInput)
  .sleep("cool_off", HOUR_MS)
  .respond(({ input }) => ({ status: 201, body: { orderId: input.orderId } }));

/** Waits for a signal with no timeout: no wake-up time is known. */
const open = workflow("open_wait")
  .input(orderInput)
  .waitFor("go")
  .respond(({ input, state }) => ({ status: 200, body: { orderId: input.orderId, go: state.go } }));

/** A wait that times out at once: the run completes with the stored 408 on its next take. */
const expiring = workflow("expiring")
  .input(orderInput)
  .waitFor("confirmed", { timeoutMs: 0 })
  .respond(() => ({ status: 201, body: { never: true } }));

const sign = (bytes: Buffer | string) => createHmac("sha256", SECRET).update(bytes).digest("hex");

/** The application's verification: HMAC-SHA256 of the raw body; account `blocked` is genuine but refused. */
function verifyWith(header: (name: string) => string | undefined) {
  return (event: WebhookEvent<unknown>): boolean => {
    if (header("x-psp-account") === "blocked") throw new WebhookVerificationError(403, "account blocked");
    const given = Buffer.from(header("x-psp-signature") ?? "", "utf8");
    const expected = Buffer.from(sign(event.rawBody), "utf8");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
}

/** The provider's event: `{ type, account, reference, name, data }`; pings are acknowledged and ignored. */
function toSignal(event: VerifiedWebhookEvent<unknown>): WebhookSignal | null {
  const body = event.body as { type: string; account: string; reference: string; name: string; data: unknown };
  if (body.type === "ping") return null;
  return { tenantId: body.account, key: body.reference, name: body.name, payload: body.data };
}

const tenant = () => "t1";
const location = (_req: unknown, run: { tenantId: string; key: string }) => `/runs/${encodeURIComponent(run.key)}`;
type OrderInput = z.infer<typeof orderInput>;
const flows: readonly (readonly [string, Workflow<OrderInput, unknown>])[] = [
  ["/payments", payment],
  ["/cool-off", coolOff],
  ["/open", open],
  ["/expiring", expiring],
];

interface App {
  readonly url: string;
  close(): Promise<void>;
}

async function listen(server: http.Server): Promise<App> {
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

const harnesses: Record<string, (engine: Engine) => Promise<App>> = {
  async express(engine) {
    const app = express();
    for (const [path, wf] of flows) {
      app.post(path, ex.idempotent(engine, wf, { tenant, input: (req) => req.body, location }));
    }
    app.post(
      "/payments-wait",
      ex.idempotent(engine, payment, { tenant, input: (req) => req.body, location, waitInFlightMs: 60_000 }),
    );
    app.post(
      "/webhooks/psp",
      ex.webhook(engine, {
        verify: (e) => verifyWith((n) => e.request.get(n))(e),
        signal: toSignal,
        maxRequestBytes: 1024,
      }),
    );
    return listen(http.createServer(app));
  },
  async fastify(engine) {
    const app = Fastify();
    for (const [path, wf] of flows) {
      app.post(path, fa.idempotent(engine, wf, { tenant, input: (req) => req.body, location }));
    }
    app.post(
      "/payments-wait",
      fa.idempotent(engine, payment, { tenant, input: (req) => req.body, location, waitInFlightMs: 60_000 }),
    );
    const header = (req: { headers: Record<string, unknown> }) => (n: string) => req.headers[n] as string | undefined;
    await app.register(
      fa.webhook(engine, {
        url: "/webhooks/psp",
        verify: (e) => verifyWith(header(e.request))(e),
        signal: toSignal,
        maxRequestBytes: 1024,
      }),
    );
    await app.listen({ port: 0, host: "127.0.0.1" });
    return {
      url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      close: () => app.close(),
    };
  },
  async hono(engine) {
    const app = new Hono();
    for (const [path, wf] of flows) {
      app.post(path, ho.idempotent(engine, wf, { tenant, input: (c) => c.req.json(), location }));
    }
    app.post(
      "/payments-wait",
      ho.idempotent(engine, payment, { tenant, input: (c) => c.req.json(), location, waitInFlightMs: 60_000 }),
    );
    app.post(
      "/webhooks/psp",
      ho.webhook(engine, {
        verify: (e) => verifyWith((n) => e.request.req.header(n))(e),
        signal: toSignal,
        maxRequestBytes: 1024,
      }),
    );
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
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
  async fetch(engine) {
    const input = (request: Request) => request.json();
    const routes = flows.map(([path, wf]) => ({
      method: "POST",
      path,
      handle: fe.idempotent(engine, wf, { tenant, input, location }),
    }));
    routes.push(
      {
        method: "POST",
        path: "/payments-wait",
        handle: fe.idempotent(engine, payment, { tenant, input, location, waitInFlightMs: 60_000 }),
      },
      {
        method: "POST",
        path: "/webhooks/psp",
        handle: fe.webhook(engine, {
          verify: (e) => verifyWith((n) => e.request.headers.get(n) ?? undefined)(e),
          signal: toSignal,
          maxRequestBytes: 1024,
        }),
      },
    );
    return serveFetch(fetchRouter(routes));
  },
};

const problemCode = (res: Sent) => (res.json as { code?: string } | undefined)?.code;
const retryAfter = (res: Sent) => Number(res.headers["retry-after"]);

describe.each(Object.keys(harnesses))("%s", (name) => {
  let app: App;
  beforeAll(async () => {
    app = await (harnesses[name] as (engine: Engine) => Promise<App>)(t.engine);
  });
  afterAll(async () => {
    await app?.close();
  });

  const post = (path: string, key: string, json: unknown) =>
    send(app.url, {
      path,
      headers: [
        ["Idempotency-Key", key],
        ["Authorization", "Bearer t1"],
      ],
      json,
    });
  /** A webhook as the provider sends it: these exact bytes, signed. */
  const deliver = (text: string, opts: { signature?: string; account?: string } = {}) =>
    send(app.url, {
      path: "/webhooks/psp",
      headers: [
        ["Content-Type", "application/json"],
        ["X-Psp-Signature", opts.signature ?? sign(text)],
        ...(opts.account ? [["X-Psp-Account", opts.account] as [string, string]] : []),
      ],
      body: text,
    });
  const confirmation = (key: string, data: unknown, name = "confirmed") =>
    // Odd spacing and key order on purpose: the signature covers these bytes, not a re-serialisation.
    `{"data": ${JSON.stringify(data)},   "type":"payment.confirmed","reference":${JSON.stringify(key)},"account":"t1","name":${JSON.stringify(name)}}`;
  const fresh = () => {
    const id = randomUUID().slice(0, 8);
    return { key: `k-${id}`, input: { orderId: `o-${name}-${id}`, amountCents: 4999 } };
  };

  it("a run waiting for 3-D Secure: 202 with the accepted body, Location and Retry-After; 409 until the webhook; then 201 once", async () => {
    const { key, input } = fresh();
    const first = await post("/payments", key, input);
    expect(first.status).toBe(202);
    expect(first.json).toEqual({
      orderId: input.orderId,
      status: "requires_confirmation",
      authorization: `au_${input.orderId}`,
    });
    expect(first.headers.location).toBe(`/runs/${key}`);
    // The wait's timeout is an hour away on the database clock.
    expect(retryAfter(first)).toBeGreaterThan(3000);
    expect(retryAfter(first)).toBeLessThanOrEqual(3600);
    expect(first.headers["idempotent-replayed"]).toBeUndefined();

    const retry = await post("/payments", key, input);
    expect({ status: retry.status, code: problemCode(retry) }).toEqual({ status: 409, code: "key_in_progress" });
    expect(retryAfter(retry)).toBeGreaterThan(3000);
    expect(retryAfter(retry)).toBeLessThanOrEqual(3600);
    expect(retry.headers.location).toBe(`/runs/${key}`);
    expect((await post("/payments", key, { ...input, amountCents: 1 })).status).toBe(422);

    const text = confirmation(key, { outcome: "approved" });
    const delivered = await deliver(text);
    expect(delivered.status).toBe(200);
    expect(delivered.json).toEqual({ received: true, duplicate: false, woke: true });
    // The provider retries the same event twice: it counts once, and each retry gets a 2xx.
    for (let i = 0; i < 2; i++) {
      const again = await deliver(text);
      expect(again.status).toBe(200);
      expect(again.json).toEqual({ received: true, duplicate: true, woke: false });
    }

    // Due now: the client's retry resumes it after the wait, captures and gets the final answer.
    const done = await post("/payments", key, input);
    expect(done.status).toBe(201);
    expect(done.json).toEqual({ orderId: input.orderId, capture: `cap_au_${input.orderId}`, outcome: "approved" });
    const replay = await post("/payments", key, input);
    expect(replay.status).toBe(201);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(replay.sha256).toBe(done.sha256);
    expect({ authorize: runs(`authorize:${input.orderId}`), capture: runs(`capture:${input.orderId}`) }).toEqual({
      authorize: 1,
      capture: 1,
    });
    expect((await t.engine.inspect("t1", key))?.state).toMatchObject({ confirmed: { outcome: "approved" } });
    // A late duplicate after completion still gets a 2xx; a different payload does not.
    expect((await deliver(text)).json).toMatchObject({ duplicate: true });
    const conflicting = await deliver(confirmation(key, { outcome: "declined" }));
    expect({ status: conflicting.status, code: problemCode(conflicting) }).toEqual({
      status: 422,
      code: "key_mismatch",
    });
  });

  it("waitInFlightMs: a retry of a suspended run waits for the webhook and answers with the final response", async () => {
    const { key, input } = fresh();
    expect((await post("/payments-wait", key, input)).status).toBe(202);
    const waiting = post("/payments-wait", key, input);
    // Give the retry a moment to start waiting (on a slow machine it may come after the signal
    // instead: it then resumes the due run at once, and the answer is the same).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");
    expect((await deliver(confirmation(key, { outcome: "approved" }))).status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({ outcome: "approved" });
    expect(runs(`capture:${input.orderId}`)).toBe(1);
  });

  it("a sleep: Retry-After points at its wake-up time, on the 202 and on the 409", async () => {
    const { key, input } = fresh();
    const first = await post("/cool-off", key, input);
    expect(first.status).toBe(202);
    expect(first.json).toBeNull();
    expect(retryAfter(first)).toBeGreaterThan(3000);
    expect(retryAfter(first)).toBeLessThanOrEqual(3600);
    const retry = await post("/cool-off", key, input);
    expect(retry.status).toBe(409);
    expect(retryAfter(retry)).toBeGreaterThan(3000);
    expect(retryAfter(retry)).toBeLessThanOrEqual(3600);
    const record = await t.engine.inspect("t1", key);
    expect(record?.waitingFor).toMatchObject({ kind: "sleep", name: "cool_off" });
  });

  it("a wait with no timeout: Retry-After is the lease length, on the 202 and on the 409", async () => {
    const { key, input } = fresh();
    const first = await post("/open", key, input);
    expect(first.status).toBe(202);
    // The engine's lease in these tests is 3 s.
    expect(first.headers["retry-after"]).toBe("3");
    const retry = await post("/open", key, input);
    expect(retry.status).toBe(409);
    expect(retry.headers["retry-after"]).toBe("3");
    expect((await deliver(confirmation(key, "now", "go"))).status).toBe(200);
    const done = await post("/open", key, input);
    expect({ status: done.status, json: done.json }).toEqual({
      status: 200,
      json: { orderId: input.orderId, go: "now" },
    });
  });

  it("the webhook refuses what it cannot verify, and maps idempo's errors to statuses", async () => {
    const { key, input } = fresh();
    expect((await post("/payments", key, input)).status).toBe(202);
    const text = confirmation(key, { outcome: "approved" });

    const forged = await deliver(text, { signature: sign(`${text} `) });
    expect({ status: forged.status, code: problemCode(forged) }).toEqual({ status: 401, code: "webhook_unverified" });
    const unsigned = await send(app.url, {
      path: "/webhooks/psp",
      headers: [["Content-Type", "application/json"]],
      body: text,
    });
    expect(unsigned.status).toBe(401);
    const blocked = await deliver(text, { account: "blocked" });
    expect({ status: blocked.status, code: problemCode(blocked) }).toEqual({ status: 403, code: "webhook_forbidden" });
    // Nothing refused reached the run.
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");
    expect((await post("/payments", key, input)).status).toBe(409);

    const unknown = await deliver(confirmation(`absent-${key}`, { outcome: "approved" }));
    expect({ status: unknown.status, code: problemCode(unknown) }).toEqual({ status: 404, code: "run_not_found" });
    const wrongName = await deliver(confirmation(key, { outcome: "approved" }, "refunded"));
    expect({ status: wrongName.status, code: problemCode(wrongName) }).toEqual({ status: 400, code: "invalid_input" });
    const badPayload = await deliver(confirmation(key, { outcome: "maybe" }));
    expect({ status: badPayload.status, code: problemCode(badPayload) }).toEqual({
      status: 400,
      code: "invalid_input",
    });
    const garbled = await deliver('{"type": "payment.confirmed", ');
    expect({ status: garbled.status, code: problemCode(garbled) }).toEqual({ status: 400, code: "invalid_body" });
    const huge = await deliver(JSON.stringify({ type: "ping", pad: "x".repeat(2048) }));
    expect({ status: huge.status, code: problemCode(huge) }).toEqual({ status: 413, code: "request_too_large" });
    const ping = await deliver(JSON.stringify({ type: "ping" }));
    expect({ status: ping.status, json: ping.json }).toEqual({ status: 200, json: { received: true, ignored: true } });
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");

    expect((await deliver(text)).json).toEqual({ received: true, duplicate: false, woke: true });
  });

  it("a signal for a run that completed without it is acknowledged as run_ended, so the provider stops retrying", async () => {
    const { key, input } = fresh();
    expect((await post("/expiring", key, input)).status).toBe(202);
    // Its timeout has passed: the retry resumes it, and the wait ends with the stored 408.
    const timedOut = await post("/expiring", key, input);
    expect({ status: timedOut.status, code: problemCode(timedOut) }).toEqual({ status: 408, code: "wait_timeout" });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      const late = await deliver(confirmation(key, { outcome: "approved" }));
      expect({ status: late.status, json: late.json }).toEqual({
        status: 200,
        json: { received: true, duplicate: false, woke: false, undelivered: "run_ended" },
      });
      // No onUndelivered here: the default reports it as a warning.
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });
});

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

describe("options are checked when the route is built", () => {
  it("waitInFlightMs outside 0 to 2 147 483 647 and a location that is not a function are refused", () => {
    for (const bad of [-1, 1.5, 2 ** 31]) {
      expect(() => ex.idempotent(t.engine, payment, { tenant, input: () => ({}), waitInFlightMs: bad })).toThrow(
        /waitInFlightMs/,
      );
    }
    expect(() =>
      ho.idempotent(t.engine, payment, { tenant, input: () => ({}), location: "/runs" as unknown as () => string }),
    ).toThrow(/location/);
  });

  it("a webhook needs verify and signal, and on Fastify a url", () => {
    const signal = () => null;
    expect(() => ex.webhook(t.engine, { signal } as never)).toThrow(/verify/);
    expect(() => ho.webhook(t.engine, { verify: () => true } as never)).toThrow(/signal/);
    expect(() => fa.webhook(t.engine, { verify: () => true, signal } as never)).toThrow(/url/);
    expect(() => new WebhookVerificationError(500 as 401)).toThrow(TypeError);
  });
});
