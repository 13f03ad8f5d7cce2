/**
 * The apps of the durable tests on each adapter: workflow routes whose runs
 * suspend (a 3-D Secure wait with a timeout, a sleep, a wait with none, a
 * wait that times out at once), and a provider's webhook route with the
 * application's verification (HMAC-SHA256 of the raw body) and its mapping
 * of an event to a signal. The workflows count what they ran.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine, Workflow } from "@idempo/core";
import { workflow } from "@idempo/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { z } from "zod";
import * as ex from "../../../src/adapters/express.ts";
import * as fa from "../../../src/adapters/fastify.ts";
import * as fe from "../../../src/adapters/fetch.ts";
import * as ho from "../../../src/adapters/hono.ts";
import { WebhookVerificationError } from "../../../src/problem/errors.ts";
import type { VerifiedWebhookEvent, WebhookEvent, WebhookSignal } from "../../../src/runtime/webhook-route.ts";
import { fetchRouter, serveFetch } from "../fetch-server.ts";
import { listenOnLoopback, runningOn } from "../loopback.ts";
import type { RunningApp } from "../routes.ts";

const SECRET = "whsec_test";
const HOUR_MS = 3_600_000;

/** What the workflows did, by name: a run resumed after its wait must not run what came before again. */
const ran = new Map<string, number>();
const count = (what: string) => ran.set(what, (ran.get(what) ?? 0) + 1);
export const runs = (what: string) => ran.get(what) ?? 0;

const orderInput = z.object({ orderId: z.string(), amountCents: z.number().int().positive() });

/** A card payment that needs the provider's 3-D Secure confirmation before it is captured. */
export const payment = workflow("payment_3ds")
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

export const sign = (bytes: Buffer | string) => createHmac("sha256", SECRET).update(bytes).digest("hex");

/** The application's verification: HMAC-SHA256 of the raw body; account `blocked` is genuine but refused. */
export function verifyWith(header: (name: string) => string | undefined) {
  return (event: WebhookEvent<unknown>): boolean => {
    if (header("x-psp-account") === "blocked") throw new WebhookVerificationError(403, "account blocked");
    const given = Buffer.from(header("x-psp-signature") ?? "", "utf8");
    const expected = Buffer.from(sign(event.rawBody), "utf8");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
}

/** The provider's event: `{ type, account, reference, name, data }`; pings are acknowledged and ignored. */
export function toSignal(event: VerifiedWebhookEvent<unknown>): WebhookSignal | null {
  const body = event.body as { type: string; account: string; reference: string; name: string; data: unknown };
  if (body.type === "ping") return null;
  return { tenantId: body.account, key: body.reference, name: body.name, payload: body.data };
}

export const tenant = () => "t1";
const location = (_req: unknown, run: { tenantId: string; key: string }) => `/runs/${encodeURIComponent(run.key)}`;
type OrderInput = z.infer<typeof orderInput>;
const flows: readonly (readonly [string, Workflow<OrderInput, unknown>])[] = [
  ["/payments", payment],
  ["/cool-off", coolOff],
  ["/open", open],
  ["/expiring", expiring],
];

export const harnesses: Record<string, (engine: Engine) => Promise<RunningApp>> = {
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
    return listenOnLoopback(http.createServer(app));
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
    return runningOn(server);
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
