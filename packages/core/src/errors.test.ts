import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { IdempoError, IdempotencyKeyInProgressError } from "./errors.js";

/** Raised a few awaits away from its reader, as the engine raises a 409. */
async function refused(): Promise<never> {
  await Promise.resolve();
  throw new IdempotencyKeyInProgressError("t", "k", 1500);
}

async function caught(): Promise<IdempotencyKeyInProgressError> {
  try {
    await refused();
  } catch (error) {
    return error as IdempotencyKeyInProgressError;
  }
  throw new Error("not refused");
}

const MESSAGE = "idempotency key 'k' (tenant 't') is being processed by another attempt; retry in 1500 ms";

describe("IdempotencyKeyInProgressError (409): a stack taken when it is first read", () => {
  it("holds no stack until something reads it", async () => {
    const error = await caught();
    expect(Object.getOwnPropertyDescriptor(error, "stack")).toBeUndefined();
    const stack = error.stack;
    expect(Object.getOwnPropertyDescriptor(error, "stack")).toMatchObject({ value: stack, enumerable: false });
    expect(error.stack).toBe(stack);
  });

  it("reads as a usable stack: the class, the message, and the reader's frames in the caller's file", async () => {
    const error = await caught();
    const lines = String(error.stack).split("\n");
    expect(lines[0]).toBe(`IdempotencyKeyInProgressError: ${MESSAGE}`);
    expect(lines[1]).toMatch(/^ {4}at .*errors\.test\.ts:\d+:\d+\)?$/);
  });

  it("printed whole (util.inspect, console.log), shows the caller's frames first, not the printer's", async () => {
    const error = await caught();
    const lines = inspect(error).split("\n");
    expect(lines[0]).toBe(`IdempotencyKeyInProgressError: ${MESSAGE}`);
    expect(lines[1]).toMatch(/errors\.test\.ts:\d+:\d+\)?$/);
    expect(lines.some((l) => l.includes("node:internal/util/inspect"))).toBe(false);
  });

  it("keeps its class, code, status, fields and JSON shape", async () => {
    const error = await caught();
    expect(error).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect(error).toBeInstanceOf(IdempoError);
    expect(error).toBeInstanceOf(Error);
    expect([error.name, error.message, error.code, error.httpStatus, error.retryAfterMs]).toEqual([
      "IdempotencyKeyInProgressError",
      MESSAGE,
      "key_in_progress",
      409,
      1500,
    ]);
    expect(JSON.stringify(error)).toBe(
      '{"code":"key_in_progress","httpStatus":409,"name":"IdempotencyKeyInProgressError","retryAfterMs":1500}',
    );
    expect(Object.keys(error)).toEqual(["code", "httpStatus", "name", "retryAfterMs"]);
    expect(String(error)).toBe(`IdempotencyKeyInProgressError: ${MESSAGE}`);
  });

  it("takes a stack assigned to it, before or after a read", async () => {
    const error = await caught();
    error.stack = "replaced";
    expect(error.stack).toBe("replaced");
    const other = await caught();
    void other.stack;
    other.stack = "replaced too";
    expect(other.stack).toBe("replaced too");
  });

  it("leaves Error.stackTraceLimit as it found it, and follows it when read", async () => {
    const saved = Error.stackTraceLimit;
    try {
      Error.stackTraceLimit = 1;
      const error = await caught();
      expect(Error.stackTraceLimit).toBe(1);
      expect(
        String(error.stack)
          .split("\n")
          .filter((l) => l.startsWith("    at ")),
      ).toHaveLength(1);
    } finally {
      Error.stackTraceLimit = saved;
    }
  });
});
