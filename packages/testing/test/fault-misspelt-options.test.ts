/**
 * Fault of the kind "misspelt options are accepted": `crashAtEveryBoundary`
 * took `{ effect: ... }` or `{ keyprefix }` without a word, and `pauseAt`
 * with `{ atempt: 2 }` held every attempt. The helpers check their options
 * as the engine does: an unknown key names the known ones, a value of the
 * wrong type is named with its type.
 */
import { createEngine, InvalidOptionError } from "@idempo/core";
import { describe, expect, it } from "vitest";
import { crashAtEveryBoundary, pauseAt, testEngine } from "../src/index.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/database.ts";
import { FakeProvider } from "./support/provider.ts";

const t = useTestDatabase();
const input = { cartId: "cart-s", amountCents: 100 };

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (error) {
    return error;
  }
  return undefined;
}

function refused(error: unknown, option: string, message: RegExp): void {
  expect(error, option).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  expect((error as Error).message).toMatch(message);
}

describe("@idempo/testing options", () => {
  it("crashAtEveryBoundary: an unknown key and a wrong type are refused before any run", async () => {
    const provider = new FakeProvider();
    const engine = createEngine({ db: t.db });
    const checkout = makeCheckout(provider);
    refused(
      await refusal(
        crashAtEveryBoundary(engine, checkout, input, { effects: { c: () => 0 }, keyprefix: "x" } as never),
      ),
      "keyprefix",
      /^crashAtEveryBoundary: unknown option 'keyprefix' \(did you mean 'keyPrefix'\?\); the known options are effects, keyPrefix, requests, signals, tenantId$/,
    );
    refused(
      await refusal(crashAtEveryBoundary(engine, checkout, input, { effects: { c: () => 0 }, tenantId: 7 as never })),
      "tenantId",
      /tenantId must be a string, got the number 7/,
    );
    expect(provider.calls).toHaveLength(0);
  });

  it("pauseAt: a misspelt filter would hold every attempt", async () => {
    const engine = createEngine({ db: t.db });
    refused(
      await refusal(() => pauseAt(engine, "called:step:charge", { atempt: 2 } as never)),
      "atempt",
      /^pauseAt: unknown option 'atempt' \(did you mean 'attempt'\?\); the known options are attempt, key, tenantId$/,
    );
    refused(
      await refusal(() => pauseAt(engine, "called:step:charge", { attempt: "2" as never })),
      "attempt",
      /got the string "2"/,
    );
  });

  it("testEngine: engine options are checked as createEngine checks them", async () => {
    refused(await refusal(() => testEngine(t.db, { leaseMS: 10 } as never)), "leaseMS", /did you mean 'leaseMs'/);
  });
});
