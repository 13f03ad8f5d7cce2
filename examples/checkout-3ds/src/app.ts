import type { Engine, RunResult } from "@idempo/core";
import { IdempoError, IdempotencyKeyInProgressError } from "@idempo/core";
import { idempotent, webhook } from "@idempo/http/hono";
import { Hono } from "hono";
import { PSP_SIGNATURE_HEADER, pspEventSchema, signatureMatches, THREE_DS_COMPLETED } from "./psp-events.js";
import type { Checkout3ds } from "./workflow.js";
import { THREE_DS } from "./workflow.js";

/** API keys and the tenant each authenticates: stands in for the shop's authentication. */
const API_KEYS: Readonly<Record<string, string>> = { sk_acme: "acme" };

/** The tenant of a request, from `Authorization: Bearer <api key>`. */
function tenantOf(authorization: string | undefined): string | undefined {
  const token = /^Bearer (.+)$/.exec(authorization ?? "")?.[1];
  return token === undefined ? undefined : API_KEYS[token];
}

/** Where a checkout's status is followed: `Location` of its 202. */
export const statusPath = (key: string) => `/checkouts/${encodeURIComponent(key)}`;

/**
 * The shop's HTTP API:
 * - `POST /checkouts` (with `Idempotency-Key`): runs the checkout; 202
 *   with the challenge URL, `Location` and `Retry-After` while it waits
 *   for 3-D Secure, 409 to a retry meanwhile, then the final 201 or 402.
 * - `GET /checkouts/:key`: the status monitor `Location` points at: the
 *   stored response once the run completed, 202 with `Retry-After` before.
 * - `POST /webhooks/psp`: the provider's webhook; checks the signature
 *   over the raw body and signals the run (`engine.signal`); 200 for a new
 *   and for a repeated event.
 */
export function shopApp(engine: Engine, flow: Checkout3ds, options: { webhookSecret: string }): Hono {
  const app = new Hono();
  app.post(
    "/checkouts",
    idempotent(engine, flow, {
      tenant: (c) => tenantOf(c.req.header("authorization")),
      input: (c) => c.req.json(),
      location: (_c, run) => statusPath(run.key),
    }),
  );
  app.get("/checkouts/:key", async (c) => {
    const tenantId = tenantOf(c.req.header("authorization"));
    if (!tenantId) return c.json({ code: "unauthenticated" }, 401);
    let result: RunResult<unknown>;
    try {
      result = await engine.wait(tenantId, c.req.param("key"), { timeoutMs: 0 });
    } catch (error) {
      if (error instanceof IdempotencyKeyInProgressError) {
        c.header("retry-after", String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
        return c.json({ status: "pending" }, 202);
      }
      if (error instanceof IdempoError) return c.json({ code: error.code }, error.httpStatus as 404);
      throw error;
    }
    return c.json(result.body, result.status as 200);
  });
  app.post(
    "/webhooks/psp",
    webhook(engine, {
      verify: ({ request, rawBody }) =>
        signatureMatches(options.webhookSecret, rawBody, request.req.header(PSP_SIGNATURE_HEADER)),
      signal: ({ body }) => {
        const event = pspEventSchema.safeParse(body);
        // Events this shop does not act on are acknowledged, so the provider stops sending them.
        if (!event.success || event.data.type !== THREE_DS_COMPLETED) return null;
        const { reference, ...result } = event.data.data;
        return { tenantId: reference.tenantId, key: reference.key, name: THREE_DS, payload: result };
      },
    }),
  );
  return app;
}
