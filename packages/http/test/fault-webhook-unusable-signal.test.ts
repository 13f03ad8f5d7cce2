/**
 * Fault: a webhook process created without `workflows` answered 200 to a
 * signal whose payload failed the wait's schema; the run then parked on it
 * and the provider's corrected delivery got 422. Now the engine of a
 * process that cannot check the payload against the run's own version
 * stores nothing, and the route answers 409 `run_state` (not 2xx), so the
 * provider retries until a process that has the version takes it; that one
 * answers 400 to the bad payload and 200 to the corrected one.
 */
import { createHmac } from "node:crypto";
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { Hono } from "hono";
import { sql } from "kysely";
import { expect, it } from "vitest";
import { z } from "zod";
import * as ho from "../src/adapters/hono.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const SECRET = "whsec_unusable";
const sign = (text: string) => createHmac("sha256", SECRET).update(text).digest("hex");

const payment = workflow("unusable_signal_payment")
  .waitFor("three_ds", { schema: z.object({ outcome: z.enum(["approved", "declined"]) }) })
  .respond(({ state }) => ({ status: 201, body: { outcome: state.three_ds.outcome } }));

function webhookApp(engine: Engine): Hono {
  const app = new Hono();
  app.post(
    "/webhooks/psp",
    ho.webhook(engine, {
      verify: ({ request, rawBody }) => request.req.header("x-psp-signature") === sign(rawBody.toString("utf8")),
      signal: ({ body }) => {
        const event = body as { reference: string; data: unknown };
        return { tenantId: "acme", key: event.reference, name: "three_ds", payload: event.data };
      },
    }),
  );
  return app;
}

async function deliver(app: Hono, data: unknown): Promise<{ status: number; code?: string }> {
  const text = JSON.stringify({ reference: "pay-1", data });
  const res = await app.request("/webhooks/psp", {
    method: "POST",
    headers: { "content-type": "application/json", "x-psp-signature": sign(text) },
    body: text,
  });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, ...(body.code ? { code: body.code } : {}) };
}

async function storedSignals(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = 'acme' AND key = 'pay-1'`.execute(t.db);
  return rows[0]?.n ?? -1;
}

it("a webhook process without the run's version answers 409 and stores nothing; one with it checks the schema", async () => {
  const shop = createEngine({ db: t.db });
  expect((await shop.runOnce(payment, { tenantId: "acme", key: "pay-1", input: {} })).status).toBe(202);

  const blind = webhookApp(createEngine({ db: t.db }));
  expect(await deliver(blind, { outcome: "maybe" })).toEqual({ status: 409, code: "run_state" });
  expect(await deliver(blind, { outcome: "approved" })).toEqual({ status: 409, code: "run_state" });
  expect(await storedSignals()).toBe(0);

  const knowing = webhookApp(createEngine({ db: t.db, workflows: [payment] }));
  expect(await deliver(knowing, { outcome: "maybe" })).toEqual({ status: 400, code: "invalid_input" });
  expect(await deliver(knowing, { outcome: "approved" })).toEqual({ status: 200 });
  expect(await storedSignals()).toBe(1);
  expect(await shop.runOnce(payment, { tenantId: "acme", key: "pay-1", input: {} })).toMatchObject({
    status: 201,
    body: { outcome: "approved" },
  });
});
