import http from "node:http";
import type { AddressInfo } from "node:net";
import type { NextFunction, Request, Response } from "express";
import express from "express";
import { idempotency, idempotent } from "../../../src/adapters/express.ts";
import type { Harness, TestResponse } from "../routes.ts";
import { tenantOf, testRoutes } from "../routes.ts";

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
        app[method](
          route.path,
          express.json(),
          idempotent(deps.engine, route.workflow, {
            tenant,
            input: (req) => route.input({ params: req.params as Record<string, string>, body: req.body, run: null }),
            ...(route.headers ? { headers: route.headers } : {}),
          }),
        );
      }
    }
    app.use((_err: unknown, _req: Request, res: Response, _next: NextFunction) => {
      res.status(500).json({ error: "internal" });
    });
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  },
};
