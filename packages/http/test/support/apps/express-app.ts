import http from "node:http";
import type { NextFunction, Request, Response } from "express";
import express from "express";
import { idempotency, idempotent } from "../../../src/adapters/express.ts";
import { listenOnLoopback } from "../loopback.ts";
import type { Harness, TestRequest, TestResponse } from "../routes.ts";
import { FAIL_BEFORE_HANDLER, mountedHandlers, tenantOf, testRoutes } from "../routes.ts";

function write(res: Response, answer: TestResponse): void {
  res.status(answer.status);
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name, value);
  if (answer.json !== undefined) res.json(answer.json);
  else if (answer.bytes !== undefined) res.send(answer.bytes);
  else if (answer.text !== undefined) res.send(answer.text);
  else if (answer.chunks !== undefined) {
    const chunks = [...answer.chunks];
    const next = () => {
      const chunk = chunks.shift();
      if (chunk === undefined) res.end();
      else {
        res.write(chunk);
        setTimeout(next, 5);
      }
    };
    next();
  } else res.end();
}

export const expressHarness: Harness = {
  name: "express",
  http2: false,
  async start(deps) {
    const app = express();
    const tenant = (req: Request) => tenantOf(req.headers.authorization);
    for (const route of testRoutes(deps)) {
      const method = route.method === "POST" ? "post" : "delete";
      if (route.kind === "wrap") {
        app[method](
          route.path,
          route.parseFirst ? express.json() : (_req: Request, _res: Response, next: NextFunction) => next(),
          idempotency(deps.engine, { ...route.options, tenant }),
          (req: Request, res: Response, next: NextFunction) => {
            route
              .handle({ params: req.params as Record<string, string>, body: req.body, run: res.locals.idempotency })
              .then((answer) => write(res, answer), next);
          },
        );
      } else {
        // No body parser: the route reads the body itself, within its maxRequestBytes.
        app[method](
          route.path,
          idempotent(deps.engine, route.workflow, {
            tenant,
            input: (req) => route.input({ params: req.params as Record<string, string>, body: req.body, run: null }),
            ...(route.headers ? { headers: route.headers } : {}),
            ...route.options,
          }),
        );
      }
    }
    // Mounted for a whole prefix, in front of the routes, with a middleware that can fail between them.
    app.use("/mounted", idempotency(deps.engine, { tenant }));
    app.use("/mounted", (req: Request, _res: Response, next: NextFunction) => {
      next(req.headers[FAIL_BEFORE_HANDLER] ? new Error("a middleware failed") : undefined);
    });
    const mounted = mountedHandlers(deps);
    const testRequest = (req: Request, res: Response): TestRequest => ({
      params: req.params as Record<string, string>,
      body: req.body,
      run: res.locals.idempotency,
    });
    app.post("/mounted/orders", async (req: Request, res: Response) =>
      write(res, await mounted.orders(testRequest(req, res))),
    );
    app.post("/mounted/fail", async (req: Request, res: Response) =>
      write(res, await mounted.fail(testRequest(req, res))),
    );
    app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
      // Under /mounted, Express's own final handler answers: its HTML page with the stack trace.
      if (req.originalUrl.startsWith("/mounted")) return next(err);
      res.status(500).json({ error: "internal" });
    });
    return listenOnLoopback(http.createServer(app));
  },
};
