/**
 * Late and repeated webhooks: a provider retries every answer that is not
 * 2xx, for days. The webhook route acknowledges (2xx) every signal that no
 * retry could ever deliver: a repeat of one delivered before, a signal for
 * a run that already ended (a 3-D Secure confirmation after the timeout
 * voided the payment, a canceled run), and one for a run past retention.
 * Each is reported to the application through `onUndelivered` (by default
 * a console warning), never dropped in silence; a report that fails is not
 * acknowledged. What a retry can still fix stays an error: a payload that
 * fails the wait's schema (the provider's corrected retry is delivered), a
 * name the run does not wait for, an absent key, an unmigrated database.
 * On each adapter, real servers on loopback, real PostgreSQL.
 */
import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine } from "@idempo/core";
import { createEngine, RunNotFoundError, workflow } from "@idempo/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { sql } from "kysely";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as ho from "../src/adapters/hono.ts";
import type { UndeliveredSignal, WebhookOptions } from "../src/runtime/webhook-route.ts";
import type { Sent } from "./support/client.ts";
import { send } from "./support/client.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const SECRET = "whsec_redelivery";
const HOUR_MS = 3_600_000;
const sign = (text: string) => createHmac("sha256", SECRET).update(text).digest("hex");

const confirmed = z.object({ outcome: z.enum(["approved", "declined"]) });
const orderInput = z.object({ orderId: z.string() });

/** Waits an hour for the provider's 3-D Secure confirmation. */
const payment = workflow("redelivery_payment")
  .input(orderInput)
  .waitFor("confirmed", { timeoutMs: HOUR_MS, schema: confirmed })
  .respond(({ state }) => ({ status: 201, body: { outcome: state.confirmed.outcome } }));

/** Times out at once: the run ends with its stored 408 (the payment is voided) on its next take. */
const voided = workflow("redelivery_voided")
  .input(orderInput)
  .waitFor("confirmed", { timeoutMs: 0, schema: confirmed })
  .respond(() => ({ status: 201, body: { never: true } }));

type AnyReq = unknown;
type Options = Omit<WebhookOptions<AnyReq>, "verify" | "signal">;

interface App {
  readonly url: string;
  close(): Promise<void>;
}

/** The provider's event: `{ account, reference, name, data }`, signed over these bytes. */
const signalOf: WebhookOptions<AnyReq>["signal"] = ({ body }) => {
  const event = body as { account: string; reference: string; name: string; data: unknown };
  return { tenantId: event.account, key: event.reference, name: event.name, payload: event.data };
};

function optionsFor(header: (req: AnyReq, name: string) => string | undefined, extra: Options) {
  return {
    verify: ({ request, rawBody }: { request: AnyReq; rawBody: Buffer }) =>
      header(request, "x-psp-signature") === sign(rawBody.toString("utf8")),
    signal: signalOf,
    ...extra,
  };
}

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

const harnesses: Record<string, (engine: Engine, extra: Options) => Promise<App>> = {
  async express(engine, extra) {
    const app = express();
    const opts = optionsFor((req, n) => (req as express.Request).get(n), extra);
    app.post("/webhooks/psp", ex.webhook(engine, opts as WebhookOptions<express.Request>));
    app.use((_error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ error: "internal" });
    });
    return listenNode(http.createServer(app));
  },
  async fastify(engine, extra) {
    const app = Fastify();
    const opts = optionsFor((req, n) => (req as { headers: Record<string, string> }).headers[n], extra);
    await app.register(fa.webhook(engine, { url: "/webhooks/psp", ...opts } as never));
    await app.listen({ port: 0, host: "127.0.0.1" });
    return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
  },
  async hono(engine, extra) {
    const app = new Hono();
    app.onError((_error, c) => c.json({ error: "internal" }, 500));
    const opts = optionsFor((c, n) => (c as { req: { header(n: string): string | undefined } }).req.header(n), extra);
    app.post("/webhooks/psp", ho.webhook(engine, opts as never));
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
};

const problemCode = (res: Sent) => (res.json as { code?: string } | undefined)?.code;

describe.each(Object.keys(harnesses))("%s", (name) => {
  const start = harnesses[name] as (engine: Engine, extra: Options) => Promise<App>;
  const reports: UndeliveredSignal<AnyReq>[] = [];
  let failReport = false;
  let app: App;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    app = await start(t.engine, {
      onUndelivered: (event) => {
        if (failReport) throw new Error("the report could not be written");
        reports.push(event);
      },
    });
  });
  afterEach(() => {
    reports.length = 0;
    failReport = false;
  });
  afterAll(async () => {
    await app?.close();
    for (const close of closers) await close();
  });

  const deliverTo = (url: string, key: string, data: unknown, signalName = "confirmed") => {
    const text = JSON.stringify({ account: "t1", reference: key, name: signalName, data });
    return send(url, {
      path: "/webhooks/psp",
      headers: [
        ["Content-Type", "application/json"],
        ["X-Psp-Signature", sign(text)],
      ],
      body: text,
    });
  };
  const deliver = (key: string, data: unknown, signalName?: string) => deliverTo(app.url, key, data, signalName);
  const suspended = async (key: string) => {
    const first = await t.engine.runOnce(payment, { tenantId: "t1", key, input: { orderId: key } });
    expect(first.outcome).toBe("suspended");
  };
  const fresh = () => `wh-${name}-${randomUUID().slice(0, 8)}`;
  const seen = () => reports.map((r) => ({ reason: r.reason, key: r.signal.key, code: r.error?.code }));

  it("a repeat of a delivered signal is acknowledged and reported as a duplicate", async () => {
    const key = fresh();
    await suspended(key);
    const delivered = await deliver(key, { outcome: "approved" });
    expect({ status: delivered.status, json: delivered.json }).toEqual({
      status: 200,
      json: { received: true, duplicate: false, woke: true },
    });
    expect(reports).toEqual([]);
    const again = await deliver(key, { outcome: "approved" });
    expect({ status: again.status, json: again.json }).toEqual({
      status: 200,
      json: { received: true, duplicate: true, woke: false },
    });
    expect(seen()).toEqual([{ reason: "duplicate", key, code: undefined }]);
  });

  it("a signal for a run that already ended (the wait timed out, the run was canceled) is acknowledged and reported, on every redelivery", async () => {
    const late = fresh();
    await t.engine.runOnce(voided, { tenantId: "t1", key: late, input: { orderId: late } });
    const ended = await t.engine.runOnce(voided, { tenantId: "t1", key: late, input: { orderId: late } });
    expect(ended.status).toBe(408);
    const canceled = fresh();
    await suspended(canceled);
    await t.engine.cancel("t1", canceled);
    for (const key of [late, canceled]) {
      for (let i = 0; i < 2; i++) {
        const answer = await deliver(key, { outcome: "approved" });
        expect({ key, status: answer.status, json: answer.json }).toEqual({
          key,
          status: 200,
          json: { received: true, duplicate: false, woke: false, undelivered: "run_ended" },
        });
      }
    }
    expect(seen()).toEqual([
      { reason: "run_ended", key: late, code: "run_state" },
      { reason: "run_ended", key: late, code: "run_state" },
      { reason: "run_ended", key: canceled, code: "run_state" },
      { reason: "run_ended", key: canceled, code: "run_state" },
    ]);
    expect(reports[0]?.signal).toEqual({
      tenantId: "t1",
      key: late,
      name: "confirmed",
      payload: { outcome: "approved" },
    });
  });

  it("a signal for a run past retention is acknowledged and reported as run_expired, a repeat and a new one alike", async () => {
    const key = fresh();
    await suspended(key);
    expect((await deliver(key, { outcome: "approved" })).status).toBe(200);
    expect((await t.engine.runOnce(payment, { tenantId: "t1", key, input: { orderId: key } })).status).toBe(201);
    // Past retention, not yet swept: the record answers as its tombstone.
    await sql`UPDATE idempo.runs SET expires_at = now() - interval '1 minute' WHERE tenant_id = 't1' AND key = ${key}`.execute(
      t.db,
    );
    expect((await t.engine.inspect("t1", key))?.expired).toBe(true);
    for (const data of [{ outcome: "approved" }, { outcome: "declined" }]) {
      const answer = await deliver(key, data);
      expect({ status: answer.status, json: answer.json }).toEqual({
        status: 200,
        json: { received: true, duplicate: false, woke: false, undelivered: "run_expired" },
      });
    }
    // The engine acknowledged them (expired: true): reported without an error.
    expect(seen()).toEqual([
      { reason: "run_expired", key, code: undefined },
      { reason: "run_expired", key, code: undefined },
    ]);
  });

  it("a record past retention without a tombstone (tombstoneMs 0) is acknowledged as run_expired too", async () => {
    const expiredEngine = {
      ...t.engine,
      signal: async () => {
        throw new RunNotFoundError("t1", "tombstoneless");
      },
      inspect: async () => ({ expired: true }),
    } as unknown as Engine;
    const local: UndeliveredSignal<AnyReq>[] = [];
    const other = await start(expiredEngine, { onUndelivered: (event) => void local.push(event) });
    closers.push(() => other.close());
    const answer = await deliverTo(other.url, "tombstoned", { outcome: "approved" });
    expect({ status: answer.status, json: answer.json }).toEqual({
      status: 200,
      json: { received: true, duplicate: false, woke: false, undelivered: "run_expired" },
    });
    expect(local.map((r) => [r.reason, r.error?.code])).toEqual([["run_expired", "run_not_found"]]);
  });

  it("what a retry can still fix is not acknowledged: a payload failing the schema (the corrected retry is delivered), a name not waited for, an absent key", async () => {
    const key = fresh();
    await suspended(key);
    const bad = await deliver(key, { outcome: "maybe" });
    expect({ status: bad.status, code: problemCode(bad) }).toEqual({ status: 400, code: "invalid_input" });
    const wrongName = await deliver(key, { outcome: "approved" }, "refunded");
    expect({ status: wrongName.status, code: problemCode(wrongName) }).toEqual({ status: 400, code: "invalid_input" });
    const absent = await deliver(`absent-${key}`, { outcome: "approved" });
    expect({ status: absent.status, code: problemCode(absent) }).toEqual({ status: 404, code: "run_not_found" });
    expect((await t.engine.inspect("t1", key))?.status).toBe("suspended");
    const corrected = await deliver(key, { outcome: "declined" });
    expect({ status: corrected.status, json: corrected.json }).toEqual({
      status: 200,
      json: { received: true, duplicate: false, woke: true },
    });
    expect(reports).toEqual([]);
  });

  it("an unmigrated database is an error the provider retries, never an acknowledgement", async () => {
    const unmigrated = createEngine({ db: t.db, schema: `absent_${name}` });
    const local: UndeliveredSignal<AnyReq>[] = [];
    const other = await start(unmigrated, { onUndelivered: (event) => void local.push(event) });
    closers.push(() => other.close());
    const answer = await deliverTo(other.url, "any-key", { outcome: "approved" });
    expect(answer.status).toBeGreaterThanOrEqual(500);
    expect(local).toEqual([]);
  });

  it("a report that fails is not acknowledged: the provider's retry reports it again", async () => {
    const key = fresh();
    await t.engine.runOnce(voided, { tenantId: "t1", key, input: { orderId: key } });
    await t.engine.runOnce(voided, { tenantId: "t1", key, input: { orderId: key } });
    failReport = true;
    const failed = await deliver(key, { outcome: "approved" });
    expect(failed.status).toBe(500);
    failReport = false;
    const retried = await deliver(key, { outcome: "approved" });
    expect(retried.status).toBe(200);
    expect(seen()).toEqual([{ reason: "run_ended", key, code: "run_state" }]);
  });

  it("without onUndelivered, a signal acknowledged for an ended run is logged as a warning", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const other = await start(t.engine, {});
    closers.push(() => other.close());
    try {
      const key = fresh();
      await t.engine.runOnce(voided, { tenantId: "t1", key, input: { orderId: key } });
      await t.engine.runOnce(voided, { tenantId: "t1", key, input: { orderId: key } });
      expect((await deliverTo(other.url, key, { outcome: "approved" })).status).toBe(200);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(/run_ended/);
      expect(String(warn.mock.calls[0]?.[0])).toContain(key);
    } finally {
      warn.mockRestore();
    }
  });
});
