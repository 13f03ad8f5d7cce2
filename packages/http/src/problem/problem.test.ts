import {
  DatabaseUnavailableError,
  IdempotencyKeyExpiredError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  LeaseLostError,
  WorkflowDefinitionError,
} from "@idempo/core";
import { describe, expect, it } from "vitest";
import { IdempotencyKeyMissingError, InvalidRequestBodyError, RequestBodyTooLargeError } from "./errors.js";
import { problemReply } from "./problem.js";

const doc = (error: Parameters<typeof problemReply>[0]) => {
  const reply = problemReply(error);
  return { reply, body: JSON.parse(reply.body.toString("utf8")) as Record<string, unknown> };
};

describe("the problem table", () => {
  it.each([
    [new IdempotencyKeyInProgressError("t", "k", 1200), 409, "key_in_progress"],
    [new IdempotencyKeyMismatchError("t", "k", "a different request payload"), 422, "key_mismatch"],
    [
      new IdempotencyKeyExpiredError("t", "k", {
        outcome: "succeeded",
        completedAt: new Date(0),
        expiredAt: new Date(1),
        tombstoneUntil: new Date(2),
      }),
      410,
      "key_expired",
    ],
    [new InputValidationError([{ path: "$.a", message: "bad" }]), 400, "invalid_input"],
    [new InvalidIdempotencyKeyError("bad key"), 400, "invalid_key"],
    [new IdempotencyKeyMissingError(), 400, "key_missing"],
    [new InvalidRequestBodyError("Unexpected end"), 400, "invalid_body"],
    [new RequestBodyTooLargeError(10), 413, "request_too_large"],
    [new LeaseLostError("t", "k", "a fenced write"), 409, "lease_lost"],
    [new WorkflowDefinitionError("recovery point 'x' is not in workflow 'y'"), 500, "workflow_definition"],
    [new DatabaseUnavailableError(new Error("ECONNRESET")), 503, "database_unavailable"],
  ])("%s → %i %s as application/problem+json", (error, status, code) => {
    const { reply, body } = doc(error);
    expect(reply.status).toBe(status);
    expect(reply.status).toBe(error.httpStatus);
    expect(reply.headers["content-type"]).toBe("application/problem+json");
    expect(body).toMatchObject({ type: `urn:idempo:problem:${code}`, status, code });
    expect(typeof body.title).toBe("string");
  });

  it("sends Retry-After in whole seconds, rounded up, at least 1", () => {
    expect(problemReply(new IdempotencyKeyInProgressError("t", "k", 1200)).headers["retry-after"]).toBe("2");
    expect(problemReply(new IdempotencyKeyInProgressError("t", "k", 0)).headers["retry-after"]).toBe("1");
    expect(doc(new IdempotencyKeyInProgressError("t", "k", 1200)).body.retryAfterMs).toBe(1200);
  });

  it("gives client errors a detail and their issues; server errors neither, since they name internals", () => {
    expect(doc(new InputValidationError([{ path: "$.a", message: "bad" }])).body).toMatchObject({
      detail: expect.stringContaining("$.a"),
      issues: [{ path: "$.a", message: "bad" }],
    });
    expect(doc(new WorkflowDefinitionError("recovery point 'x' is not in workflow 'y'")).body.detail).toBeUndefined();
  });
});
