/**
 * The durable routes' options are checked when the route is built:
 * waitInFlightMs and location on a workflow route, verify, signal and (on
 * Fastify) url on a webhook route, and the status of a
 * WebhookVerificationError.
 */
import { describe, expect, it } from "vitest";
import * as ex from "../src/adapters/express.ts";
import * as fa from "../src/adapters/fastify.ts";
import * as ho from "../src/adapters/hono.ts";
import { WebhookVerificationError } from "../src/problem/errors.ts";
import { payment, tenant } from "./support/apps/durable-apps.ts";
import { useTestDatabase } from "./support/database.ts";

const t = useTestDatabase();

describe("options are checked when the route is built", () => {
  it("waitInFlightMs outside 0 to 2 147 483 647 and a location that is not a function are refused", () => {
    for (const bad of [-1, 1.5, 2 ** 31]) {
      expect(() => ex.idempotent(t.engine, payment, { tenant, input: () => ({}), waitInFlightMs: bad })).toThrow(
        /waitInFlightMs/,
      );
    }
    expect(() =>
      ho.idempotent(t.engine, payment, { tenant, input: () => ({}), location: "/runs" as unknown as () => string }),
    ).toThrow(/location/);
  });

  it("a webhook needs verify and signal, and on Fastify a url", () => {
    const signal = () => null;
    expect(() => ex.webhook(t.engine, { signal } as never)).toThrow(/verify/);
    expect(() => ho.webhook(t.engine, { verify: () => true } as never)).toThrow(/signal/);
    expect(() => fa.webhook(t.engine, { verify: () => true, signal } as never)).toThrow(/url/);
    expect(() => new WebhookVerificationError(500 as 401)).toThrow(TypeError);
  });
});
