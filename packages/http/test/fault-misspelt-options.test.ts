/**
 * Fault of the kind "misspelt options are accepted": `required: "yes"` was
 * taken as true and a misspelt `requird` as nothing, `methods: "POST"`
 * failed inside with "map is not a function", and `waitInFlightMs: "10"`
 * was refused as "got 10". Every options object of the adapters (the
 * middleware, workflow routes, webhooks, a Fastify route's config) is
 * checked as the engine's are: an unknown key names the known ones, a
 * value of the wrong type is named with its type, on all three frameworks.
 */
import { InvalidOptionError, workflow } from "@idempo/core";
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as fe from "../src/adapters/fetch.ts";
import * as ho from "../src/adapters/hono.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();
const tenant = () => "t1";
const signal = () => null;
const verify = () => true;
const payment = workflow("strict_payment")
  .phase("p", () => ({}))
  .respond(() => ({ status: 201, body: null }));

function refused(fn: () => unknown, option: string, message: RegExp): void {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error, option).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  expect((error as Error).message).toMatch(message);
}

/** The Fetch handler takes the handler it wraps too; its options are checked first. */
const onFetch = {
  idempotency: (engine: typeof t.engine, options: Parameters<typeof fe.idempotency>[1]) =>
    fe.idempotency(engine, options, () => new Response()),
  idempotent: fe.idempotent,
  webhook: fe.webhook,
};

const adapters = [
  ["express", ex],
  ["hono", ho],
  ["fastify", fa],
  ["fetch", onFetch],
] as const;

describe.each(adapters)("%s", (_name, adapter) => {
  it("idempotency(): an unknown option names the known ones; required, methods and numbers are checked for their type", () => {
    refused(
      () => adapter.idempotency(t.engine, { tenant, requird: true } as never),
      "requird",
      /^idempotency: unknown option 'requird' \(did you mean 'required'\?\); the known options are attemptTimeoutMs, leaseMs, maxRequestBytes, maxResponseBytes, methods, replayHeaders, required, retentionMs, storeResponse, tenant$/,
    );
    refused(
      () => adapter.idempotency(t.engine, { tenant, required: "yes" as never }),
      "required",
      /got the string "yes"/,
    );
    refused(
      () => adapter.idempotency(t.engine, { tenant, methods: "POST" as never }),
      "methods",
      /methods must be an array of method names such as \['POST', 'PATCH'\], got the string "POST"/,
    );
    refused(
      () => adapter.idempotency(t.engine, { tenant, maxResponseBytes: "1024" as never }),
      "maxResponseBytes",
      /got the string "1024"/,
    );
    refused(() => adapter.idempotency(t.engine, {} as never), "tenant", /tenant is required/);
  });

  it("idempotent(): waitInFlightMs given as a string is named as a string", () => {
    const idempotent = adapter.idempotent as typeof ex.idempotent;
    refused(
      () => idempotent(t.engine, payment, { tenant, input: () => ({}), waitInFlightMs: "10" as never }),
      "waitInFlightMs",
      /idempotent: waitInFlightMs must be an integer, got the string "10"/,
    );
    refused(
      () => idempotent(t.engine, payment, { tenant, input: () => ({}), locaton: () => "/x" } as never),
      "locaton",
      /did you mean 'location'/,
    );
  });

  it("webhook(): an unknown option is refused", () => {
    const extra = adapter === fa ? { url: "/hook" } : {};
    refused(
      () => adapter.webhook(t.engine, { ...extra, verify, signal, maxRequestByte: 10 } as never),
      "maxRequestByte",
      /webhook: unknown option 'maxRequestByte' \(did you mean 'maxRequestBytes'\?\)/,
    );
  });
});

describe("fastify route config", () => {
  it("a misspelt key in a route's config.idempotency is refused when the route is registered", async () => {
    const app = Fastify();
    await app.register(fa.idempotency(t.engine, { tenant }));
    try {
      refused(
        () => app.post("/orders", { config: { idempotency: { requird: true } as never } }, async () => ({ ok: true })),
        "requird",
        /config\.idempotency: unknown option 'requird' \(did you mean 'required'\?\)/,
      );
    } finally {
      await app.close();
    }
  });
});
