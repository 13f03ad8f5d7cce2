import { Kysely, PostgresDialect } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine } from "./engine.js";
import { clockAccessOf, resumeDue } from "./engine-internals.js";

// A pool that is never asked for a connection: nothing below runs SQL.
const db = new Kysely<unknown>({
  dialect: new PostgresDialect({
    pool: { connect: () => Promise.reject(new Error("no database")), end: async () => {} },
  }),
});

describe("an engine's internals (@idempo/core/internal)", () => {
  it("are reached from the engine createEngine made, both through the one record it attached", async () => {
    const engine = createEngine({ db, schema: "inner_test" });
    const access = clockAccessOf(engine);
    expect(access.handle).toBe(db);
    expect(access.schema).toBe("inner_test");
    expect(access.nextTick("0 9 * * *", "UTC", new Date("2026-01-01T10:00:00Z"))).toEqual(
      new Date("2026-01-02T09:00:00Z"),
    );
    // The engine's own resumer: it checks its options before any SQL, as resumeStale does.
    await expect(resumeDue(engine, { workflows: [] })).rejects.toThrow(
      "resumeDue: workflows must be a non-empty array of workflows",
    );
  });

  it("are refused for an object that only looks like an engine, naming createEngine", () => {
    const lookalike = { ...createEngine({ db }) };
    expect(() => clockAccessOf(lookalike)).toThrow(
      new TypeError("the test clock needs an engine made by createEngine"),
    );
    expect(() => resumeDue(lookalike, { workflows: [] })).toThrow(
      new TypeError("resumeDue needs an engine made by createEngine"),
    );
  });
});
