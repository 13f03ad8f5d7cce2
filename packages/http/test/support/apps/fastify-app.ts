import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import Fastify from "fastify";
import { idempotency, idempotent } from "../../../src/adapters/fastify.ts";
import type { Harness, TestRequest, TestResponse } from "../routes.ts";
import { FAIL_BEFORE_HANDLER, mountedHandlers, tenantOf, testRoutes } from "../routes.ts";

function write(reply: FastifyReply, answer: TestResponse): FastifyReply {
  reply.code(answer.status).headers({ ...answer.headers });
  if (answer.json !== undefined) return reply.send(answer.json);
  if (answer.bytes !== undefined) return reply.send(answer.bytes);
  if (answer.text !== undefined) return reply.send(answer.text);
  if (answer.chunks !== undefined) {
    const chunks = answer.chunks;
    return reply.send(
      Readable.from(
        (async function* () {
          for (const chunk of chunks) {
            yield Buffer.from(chunk);
            await new Promise((r) => setTimeout(r, 5));
          }
        })(),
      ),
    );
  }
  return reply.send();
}

export const fastifyHarness: Harness = {
  name: "fastify",
  http2: true,
  async start(deps, options = {}) {
    const app = (options.http2 ? Fastify({ http2: true }) : Fastify()) as unknown as FastifyInstance;
    app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    app.setErrorHandler((error: { statusCode?: number }, _req, reply) => {
      reply.code(error.statusCode && error.statusCode < 500 ? error.statusCode : 500).send({ error: "internal" });
    });
    const tenant = (req: FastifyRequest) => tenantOf(req.headers.authorization);
    await app.register(idempotency(deps.engine, { tenant }));
    for (const route of testRoutes(deps)) {
      if (route.kind === "wrap") {
        const { methods: _methods, ...own } = route.options;
        app.route({
          method: route.method,
          url: route.path,
          config: { idempotency: own },
          handler: async (req, reply) =>
            write(
              reply,
              await route.handle({
                params: req.params as Record<string, string>,
                body: req.body,
                run: req.idempotency,
              }),
            ),
        });
      } else {
        app.route({
          method: route.method,
          url: route.path,
          handler: idempotent(deps.engine, route.workflow, {
            tenant,
            input: (req) => route.input({ params: req.params as Record<string, string>, body: req.body, run: null }),
            ...(route.headers ? { headers: route.headers } : {}),
            ...route.options,
          }),
        });
      }
    }
    // The plugin already applies to every route; these add a hook that can fail before the handler.
    const mounted = mountedHandlers(deps);
    const failBefore = async (req: FastifyRequest) => {
      if (req.headers[FAIL_BEFORE_HANDLER]) throw new Error("a hook failed");
    };
    const testRequest = (req: FastifyRequest): TestRequest => ({
      params: req.params as Record<string, string>,
      body: req.body,
      run: req.idempotency,
    });
    app.post("/mounted/orders", { preHandler: failBefore }, async (req, reply) =>
      write(reply, await mounted.orders(testRequest(req))),
    );
    app.post("/mounted/fail", { preHandler: failBefore }, async (req, reply) =>
      write(reply, await mounted.fail(testRequest(req))),
    );
    await app.listen({ port: 0, host: "127.0.0.1" });
    const { port } = app.server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
  },
};
