/**
 * Inputs that used to get a wrong or confusing answer (kind: input
 * answers): a Date refused by z.date() after the engine made it a string,
 * an object with toJSON refused for its method, a deep input whose error
 * path ran to kilobytes. Each is refused or accepted before anything is
 * claimed, with a message that says what happened.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import { createEngine, InputValidationError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
let engine: Engine;
beforeAll(() => {
  engine = createEngine({ db: t.db, leaseMs: 5_000 });
});

let serial = 0;
const key = () => `input-answer-${++serial}`;
const refusal = async (promise: Promise<unknown>): Promise<InputValidationError> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InputValidationError);
  return error as InputValidationError;
};
const rowsFor = async (k: string) => ((await engine.inspect("t1", k)) === null ? 0 : 1);

describe("input answers", () => {
  it("a Date against z.date(): says the engine passes JSON and points to z.coerce.date()", async () => {
    const strict = workflow("dated")
      .input(z.object({ at: z.date() }))
      .respond(({ input }) => ({ status: 200, body: { at: input.at.toISOString() } }));
    const k = key();
    const error = await refusal(
      engine.runOnce(strict, { tenantId: "t1", key: k, input: { at: new Date(0) } as never }),
    );
    expect(error.issues[0]?.path).toBe("$.at");
    expect(error.message).toMatch(/passes the input as JSON/);
    expect(error.message).toMatch(/z\.coerce\.date\(\)/);
    expect(await rowsFor(k)).toBe(0);

    const coerced = workflow("dated_coerced")
      .input(z.object({ at: z.coerce.date() }))
      .respond(({ input }) => ({ status: 200, body: { at: input.at.toISOString() } }));
    const ok = await engine.runOnce(coerced, { tenantId: "t1", key: key(), input: { at: new Date(0) } });
    expect(ok.body).toEqual({ at: "1970-01-01T00:00:00.000Z" });
  });

  it("an object with toJSON is taken as what toJSON returns, and fingerprinted as that JSON", async () => {
    const echo = workflow("echo_tojson").respond(({ input }) => ({ status: 200, body: { input } }));
    const k = key();
    const money = { toJSON: () => ({ amount: "10.50", currency: "EUR" }) };
    const first = await engine.runOnce(echo, { tenantId: "t1", key: k, input: { t: money } as never });
    expect(first.body).toEqual({ input: { t: { amount: "10.50", currency: "EUR" } } });
    const again = await engine.runOnce(echo, {
      tenantId: "t1",
      key: k,
      input: { t: { currency: "EUR", amount: "10.50" } } as never,
    });
    expect(again.replayed).toBe(true);
  });

  it("a very deep input: the error path is shortened, not kilobytes long", async () => {
    const echo = workflow("echo_deep").respond(() => ({ status: 200, body: null }));
    let deep: unknown = 1;
    for (let i = 0; i < 2000; i++) deep = [deep];
    const k = key();
    const error = await refusal(engine.runOnce(echo, { tenantId: "t1", key: k, input: deep as never }));
    expect(error.message.length).toBeLessThan(200);
    expect(error.issues[0]?.path).toMatch(/…\(\d+ levels\)…/);
    expect(await rowsFor(k)).toBe(0);
  });
});
