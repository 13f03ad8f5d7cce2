/**
 * Bad input to the limits is refused with a typed error before any SQL:
 * `.concurrency` and `.priority` on the builder, `rateLimits` of the
 * engine, a step's `rateLimit` naming no limit of the engine, `enqueue`'s
 * `priority`, and a concurrency key function that answers no key.
 */

import { describe, expect, it } from "vitest";
import type { DataLayer } from "../src/index.ts";
import { createEngine, InvalidOptionError, WorkflowDefinitionError, workflow } from "../src/index.ts";

/** A data layer that fails any statement: every refusal here comes before SQL. */
const sent = (what: string) => async (): Promise<never> => {
  throw new Error(`a statement was sent (${what})`);
};
const noDb: DataLayer = {
  query: sent("query"),
  transaction: sent("transaction"),
  sessionOf: (tx) => (tx === noDb ? { query: sent("query in the caller's transaction") } : undefined),
};

const done = () => ({ status: 200, body: null });

describe("refused before any SQL", () => {
  it(".concurrency: a missing or misspelt option, a max out of range", () => {
    const wf = workflow("opt_limits");
    expect(() => wf.concurrency({ key: () => "k" } as never)).toThrow(InvalidOptionError);
    expect(() => wf.concurrency({ key: () => "k", max: 0 })).toThrow(/max must be an integer from 1 to 10,000/);
    expect(() => wf.concurrency({ key: () => "k", max: 2, maxx: 3 } as never)).toThrow(/did you mean 'max'/);
    expect(() => wf.concurrency({ key: "k", max: 2 } as never)).toThrow(/key must be a function/);
    expect(() => wf.concurrency(undefined as never)).toThrow(InvalidOptionError);
  });

  it(".priority and enqueue's priority: integers only", async () => {
    expect(() => workflow("opt_prio").priority(1.5)).toThrow(InvalidOptionError);
    expect(() => workflow("opt_prio").priority(2 ** 31)).toThrow(/priority must be an integer/);
    const engine = createEngine({ db: noDb });
    const wf = workflow("opt_prio")
      .phase("a", () => ({}))
      .respond(done);
    await expect(
      engine.enqueue(noDb, wf, { tenantId: "t", key: "k", input: {}, priority: "high" as never }),
    ).rejects.toThrow(/priority must be an integer/);
    await expect(engine.enqueue(noDb, wf, { tenantId: "t", key: "k", input: {}, priority: 0.5 })).rejects.toThrow(
      InvalidOptionError,
    );
  });

  it("rateLimits: a bad name, an unknown option, none or both rates, a rate out of range", () => {
    const make = (rateLimits: unknown) => () => createEngine({ db: noDb, rateLimits: rateLimits as never });
    expect(make({ "a b": { perSecond: 1 } })).toThrow(/rate limit name "a b"/);
    expect(make({ api: { perSecnd: 1 } })).toThrow(/did you mean 'perSecond'/);
    expect(make({ api: {} })).toThrow(/exactly one of perSecond and perMinute/);
    expect(make({ api: { perSecond: 1, perMinute: 60 } })).toThrow(/exactly one of perSecond and perMinute/);
    expect(make({ api: { perSecond: 0 } })).toThrow(/perSecond must be an integer from 1/);
    expect(make({ api: { perMinute: 30, burst: 0 } })).toThrow(/burst must be an integer from 1/);
    expect(make({ api: 5 })).toThrow(InvalidOptionError);
    expect(make([])).toThrow(InvalidOptionError);
    expect(make({ api: { perMinute: 30, burst: 5 } })).not.toThrow();
  });

  it("a step's rateLimit must be a string, and name a limit of the engine", async () => {
    expect(() =>
      workflow("opt_rate")
        .step("s", () => ({}), { rateLimit: 5 as never })
        .respond(done),
    ).toThrow(/rateLimit must be a string/);
    const wf = workflow("opt_rate")
      .step("s", () => ({}), { rateLimit: "stripe" })
      .respond(done);
    const engine = createEngine({ db: noDb, rateLimits: { api: { perSecond: 5 } } });
    await expect(engine.runOnce(wf, { tenantId: "t", key: "k", input: {} })).rejects.toThrow(
      /step 's': rateLimit 'stripe' is not a rate limit of this engine \(createEngine's rateLimits: api\)/,
    );
    expect(() => createEngine({ db: noDb, workflows: [wf] })).toThrow(WorkflowDefinitionError);
  });

  it("a concurrency key function that answers no key fails the call", async () => {
    const engine = createEngine({ db: noDb });
    const wf = (key: () => unknown) =>
      workflow("opt_key")
        .concurrency({ key: key as () => string, max: 1 })
        .phase("a", () => ({}))
        .respond(done);
    for (const bad of [() => "", () => 42, () => "x".repeat(256)]) {
      await expect(engine.runOnce(wf(bad), { tenantId: "t", key: "k", input: {} })).rejects.toThrow(
        /the concurrency key must be a string of 1 to 255 UTF-8 bytes/,
      );
    }
    await expect(
      engine.runOnce(
        wf(() => {
          throw new Error("no account");
        }),
        { tenantId: "t", key: "k", input: {} },
      ),
    ).rejects.toThrow("no account");
  });
});
