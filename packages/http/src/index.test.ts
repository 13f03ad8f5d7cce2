import { describe, expect, it } from "vitest";
import * as express from "./adapters/express.js";
import * as fastify from "./adapters/fastify.js";
import * as hono from "./adapters/hono.js";
import * as http from "./index.js";

describe("public API", () => {
  // Changing what a package exports is a decision: update this list on purpose.
  it("exports exactly these names", () => {
    expect(Object.keys(http).sort()).toEqual([
      "DEFAULT_REPLAY_HEADERS",
      "IDEMPOTENCY_KEY_HEADER",
      "IdempotencyKeyMissingError",
      "InvalidRequestBodyError",
      "PROBLEM_CONTENT_TYPE",
      "PROBLEM_TYPE_PREFIX",
      "REPLAYED_HEADER",
      "ReplayNotAcceptableError",
      "RequestBodyTooLargeError",
      "WebhookVerificationError",
      "parseIdempotencyKey",
      "problemReply",
    ]);
    for (const adapter of [express, fastify, hono]) {
      expect(Object.keys(adapter).sort()).toEqual(["idempotency", "idempotent", "webhook"]);
    }
  });
});
