import { idempotency, idempotent } from "../../../src/adapters/fetch.ts";
import { answerResponse, parsedFetchBody } from "../fetch-answers.ts";
import { fetchRouter, serveFetch } from "../fetch-server.ts";
import type { Harness } from "../routes.ts";
import { tenantOf, testRoutes } from "../routes.ts";

const tenant = (request: Request) => tenantOf(request.headers.get("authorization") ?? undefined);
const bodyOf = (request: Request) => parsedFetchBody(request.headers.get("content-type"), request);

/**
 * The Fetch handler's routes behind a small router, served through Node's
 * own `Request`/`Response`. Each route is its own handler (as in a Next.js
 * route file), so there is no middleware mounted in front of a router.
 */
export const fetchHarness: Harness = {
  name: "fetch",
  http2: true,
  mounts: false,
  joinsKeyLines: true,
  async start(deps, options = {}) {
    const routes = testRoutes(deps).map((route) => {
      if (route.kind === "wrap") {
        const handle = idempotency<[Record<string, string>]>(
          deps.engine,
          { ...route.options, tenant },
          async (request, run, params) =>
            answerResponse(await route.handle({ params, body: await bodyOf(request), run })),
        );
        return { method: route.method, path: route.path, handle };
      }
      // The path parameters reach the workflow's input through the router, as Next.js passes `{ params }`.
      const params = new WeakMap<Request, Record<string, string>>();
      const handler = idempotent(deps.engine, route.workflow, {
        tenant,
        input: async (request) =>
          route.input({ params: params.get(request) ?? {}, body: await bodyOf(request), run: undefined }),
        ...(route.headers ? { headers: route.headers } : {}),
        ...route.options,
      });
      return {
        method: route.method,
        path: route.path,
        handle: (request: Request, p: Record<string, string>) => {
          params.set(request, p);
          return handler(request);
        },
      };
    });
    return serveFetch(fetchRouter(routes), options);
  },
};
