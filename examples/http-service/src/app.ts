import { randomUUID } from "node:crypto";
import type { Engine } from "@idempo/core";
import type { IdempotencyVariables } from "@idempo/http/hono";
import { idempotency, idempotent } from "@idempo/http/hono";
import { Hono } from "hono";
import type { Kysely } from "kysely";
import { networkStats } from "./card-network.js";
import type { Database } from "./database.js";
import { createCharge, refundCharge } from "./workflows.js";

/** API keys and the account (the tenant) each belongs to. An account may hold several keys. */
const API_KEYS: Readonly<Record<string, string>> = {
  sk_test_acme: "acme",
  sk_test_acme_ci: "acme",
  sk_test_globex: "globex",
};

type AppEnv = { Variables: IdempotencyVariables & { account: string } };

/**
 * The payments API. Authentication sets the account; the tenant resolver
 * reads it from there, never from a header the client picks.
 */
export function buildApp(engine: Engine, db: Kysely<Database>): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const tenant = (c: { get(key: "account"): string }) => c.get("account");

  app.use("/v1/*", async (c, next) => {
    const key = /^Bearer (\S+)$/.exec(c.req.header("authorization") ?? "")?.[1];
    const account = key === undefined ? undefined : API_KEYS[key];
    if (account === undefined) {
      return c.json({ error: { type: "authentication_error", message: "send Authorization: Bearer <api key>" } }, 401);
    }
    c.set("account", account);
    await next();
  });

  // Workflows: phases, steps and recovery; the key is required.
  app.post(
    "/v1/charges",
    idempotent(engine, createCharge, {
      tenant,
      input: (c) => c.req.json(),
      headers: ({ status, body }) => (status === 201 ? { Location: `/v1/charges/${(body as { id: string }).id}` } : {}),
    }),
  );
  app.post(
    "/v1/charges/:id/refunds",
    idempotent(engine, refundCharge, {
      tenant,
      input: async (c) => ({ ...(await c.req.json()), charge: c.req.param("id") }),
    }),
  );

  // A plain handler, wrapped: it runs once per key and its response is replayed.
  app.post("/v1/customers", idempotency<AppEnv>(engine, { tenant }), async (c) => {
    const { email } = await c.req.json<{ email?: string }>();
    if (typeof email !== "string" || !email.includes("@")) {
      return c.json({ error: { type: "invalid_request_error", param: "email" } }, 400);
    }
    const customer = { id: `cus_${randomUUID().replaceAll("-", "").slice(0, 14)}`, tenant_id: c.get("account"), email };
    await db.insertInto("customers").values(customer).execute();
    return c.json({ id: customer.id, object: "customer", email }, 201);
  });

  app.get("/v1/charges/:id", async (c) => {
    const charge = await db
      .selectFrom("charges")
      .selectAll()
      .where("id", "=", c.req.param("id"))
      .where("tenant_id", "=", c.get("account"))
      .executeTakeFirst();
    if (!charge) return c.json({ error: { type: "invalid_request_error", code: "resource_missing" } }, 404);
    const refunds = await db
      .selectFrom("refunds")
      .select(["id", "amount"])
      .where("charge_id", "=", charge.id)
      .execute();
    return c.json({
      id: charge.id,
      object: "charge",
      amount: charge.amount,
      currency: charge.currency,
      status: charge.status,
      refunds,
    });
  });

  app.get("/v1/stats", async (c) => {
    const count = async (table: "charges" | "refunds" | "customers") =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll<number>().as("n"))
            .where("tenant_id", "=", c.get("account"))
            .executeTakeFirstOrThrow()
        ).n,
      );
    return c.json({
      charges: await count("charges"),
      refunds: await count("refunds"),
      customers: await count("customers"),
      card_network: networkStats(),
    });
  });

  return app;
}
