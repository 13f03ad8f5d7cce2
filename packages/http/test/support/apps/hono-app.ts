import http2 from "node:http2";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Context } from "hono";
import { Hono } from "hono";
import type { IdempotencyVariables } from "../../../src/adapters/hono.ts";
import { idempotency, idempotent } from "../../../src/adapters/hono.ts";
import { answerResponse, parsedFetchBody } from "../fetch-answers.ts";
import { runningOn } from "../loopback.ts";
import type { Harness, TestRequest } from "../routes.ts";
import { FAIL_BEFORE_HANDLER, mountedHandlers, tenantOf, testRoutes } from "../routes.ts";

type AppEnv = { Variables: IdempotencyVariables };

async function request(c: Context<AppEnv>): Promise<TestRequest> {
  return {
    params: c.req.param() as Record<string, string>,
    body: await parsedFetchBody(c.req.header("content-type"), c.req),
    run: c.get("idempotency"),
  };
}

export const honoHarness: Harness = {
  name: "hono",
  http2: true,
  async start(deps, options = {}) {
    const app = new Hono<AppEnv>();
    app.onError((_err, c) => c.json({ error: "internal" }, 500));
    const tenant = (c: Context<AppEnv>) => tenantOf(c.req.header("authorization"));
    for (const route of testRoutes(deps)) {
      if (route.kind === "wrap") {
        app.on(route.method, route.path, idempotency<AppEnv>(deps.engine, { ...route.options, tenant }), async (c) =>
          answerResponse(await route.handle(await request(c))),
        );
      } else {
        app.on(
          route.method,
          route.path,
          idempotent<unknown, unknown, AppEnv>(deps.engine, route.workflow, {
            tenant,
            input: async (c) => route.input(await request(c)),
            ...(route.headers ? { headers: route.headers } : {}),
            ...route.options,
          }),
        );
      }
    }
    // Mounted for a whole prefix, in front of the routes, with a middleware that can fail between them.
    app.use("/mounted/*", idempotency<AppEnv>(deps.engine, { tenant }));
    app.use("/mounted/*", async (c, next) => {
      if (c.req.header(FAIL_BEFORE_HANDLER)) throw new Error("a middleware failed");
      await next();
    });
    const mounted = mountedHandlers(deps);
    app.post("/mounted/orders", async (c) => answerResponse(await mounted.orders(await request(c))));
    app.post("/mounted/fail", async (c) => answerResponse(await mounted.fail(await request(c))));
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
    return runningOn(server);
  },
};
