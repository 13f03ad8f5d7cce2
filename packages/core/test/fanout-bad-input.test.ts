/**
 * Bad input to fan-out is refused with a typed error: out-of-range values of
 * a map's and a parallel item's options, of `.concurrency`, `.priority` and
 * the engine's `rateLimits` when the workflow or engine is built; a worker
 * given a parent whose child names a rate limit the engine lacks; map
 * inputs that are not an array, or one that fails the child's schema, park
 * the parent before any child is written. An empty map moves on at once.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import {
  createEngine,
  IdempoError,
  RunParkedError,
  UnstorableValueError,
  WorkflowDefinitionError,
  workflow,
} from "../src/index.ts";
import { childCount } from "./support/fanout.ts";

const t = useClonedDatabase("idempo_fanout_bad_input", { pool: 4 });

const plainChild = (name: string) =>
  workflow(name)
    .step("s", () => ({}))
    .respond(() => ({ status: 200, body: null }));

describe("options out of range", () => {
  // SPEC: "Every options object is checked ... raises InvalidOptionError"; errors are IdempoError with a code.
  it("out-of-range concurrency, priority and rate limits are refused when the workflow or engine is built", () => {
    const child = plainChild("fbi_child");
    const bad: [string, () => unknown][] = [];
    for (const v of [0, -1, Number.NaN, 1.5, Number.POSITIVE_INFINITY, 10_001, "2"]) {
      bad.push([
        `map concurrency ${String(v)}`,
        () => workflow("w").map("m", child, () => [], { concurrency: v as number }),
      ]);
    }
    for (const v of [0, -5, Number.NaN]) {
      bad.push([`map timeoutMs ${String(v)}`, () => workflow("w").map("m", child, () => [], { timeoutMs: v })]);
    }
    for (const v of [0, -1, Number.NaN, 1_001, 2.5]) {
      bad.push([
        `parallel concurrency ${String(v)}`,
        () => workflow("w").parallel("p", (p) => p.step("a", () => ({})), { concurrency: v }),
      ]);
    }
    for (const v of [0, -1, Number.NaN, 10_001, 0.5]) {
      bad.push([`.concurrency max ${String(v)}`, () => workflow("w").concurrency({ key: () => "k", max: v })]);
    }
    bad.push([".concurrency key not a function", () => workflow("w").concurrency({ key: "k" as never, max: 1 })]);
    bad.push([".concurrency maxx", () => workflow("w").concurrency({ key: () => "k", max: 1, maxx: 2 } as never)]);
    for (const v of [Number.NaN, 1.5, 2 ** 31, Number.POSITIVE_INFINITY]) {
      bad.push([`.priority ${String(v)}`, () => workflow("w").priority(v)]);
    }
    bad.push([
      "rateLimit on a branch",
      () => workflow("w").parallel("p", (p) => p.step("a", () => ({}), { rateLimit: "x" } as never)),
    ]);
    bad.push(["rateLimits perSecond 0", () => createEngine({ db: t.db, rateLimits: { x: { perSecond: 0 } } })]);
    bad.push([
      "rateLimits both rates",
      () => createEngine({ db: t.db, rateLimits: { x: { perSecond: 1, perMinute: 1 } } }),
    ]);
    bad.push([
      "rateLimits burst NaN",
      () => createEngine({ db: t.db, rateLimits: { x: { perSecond: 1, burst: Number.NaN } } }),
    ]);
    bad.push(["rateLimits bad name", () => createEngine({ db: t.db, rateLimits: { "a b": { perSecond: 1 } } })]);
    const notRefused = bad.filter(([, build]) => {
      try {
        build();
        return true;
      } catch (error) {
        return !(error instanceof IdempoError && typeof error.code === "string");
      }
    });
    expect(notRefused.map(([what]) => what)).toEqual([]);
  });
});

describe("a child workflow with a rate limit the engine lacks", () => {
  // limits.md: "A step name that is not in `rateLimits` raises `WorkflowDefinitionError` when the engine is
  // first given the workflow"; fan-out.md: "A worker given the parent workflow runs its child workflows too".
  it("startWorker refuses the parent", () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    const child = workflow("fbr_child")
      .step("s", () => ({}), { rateLimit: "no_such_limit" })
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("fbr_parent")
      .map("fan", child, () => [{}, {}])
      .respond(() => ({ status: 200, body: null }));
    expect(() => engine.startWorker({ workflows: [parent], sweep: false, schedules: false })).toThrow(
      WorkflowDefinitionError,
    );
  });
});

describe("map inputs", () => {
  // SPEC: "a value that cannot be stored raises a clear error naming the phase, step or respond, and the run
  // stays at its last recovery point"; such a run is parked.
  it("map inputs that are not an array park the parent with a typed error; no child is written", async () => {
    const engine = createEngine({ db: t.db });
    const child = plainChild("fbn_child");
    for (const [i, given] of [{ not: "an array" }, "abc", 3, null, undefined].entries()) {
      const parent = workflow(`fbn_parent${i}`)
        .map("fan", child, () => given as never)
        .respond(() => ({ status: 200, body: null }));
      const error = await engine.runOnce(parent, { tenantId: "fbn", key: `p${i}`, input: {} }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(UnstorableValueError);
      expect((error as IdempoError).code).toBe("unstorable_value");
      expect(await childCount(t.db, "fbn", `p${i}`)).toBe(0);
      const rec = await engine.inspect("fbn", `p${i}`);
      expect(rec?.status).toBe("parked");
      await expect(engine.runOnce(parent, { tenantId: "fbn", key: `p${i}`, input: {} })).rejects.toBeInstanceOf(
        RunParkedError,
      );
    }
  });

  it("one map input failing the child's schema: the parent is parked and none of the children is written", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("fbs_child")
      .input(z.object({ cents: z.number().int().positive() }))
      .step("s", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("fbs_parent")
      .map("fan", child, () => [{ cents: 1 }, { cents: 2 }, { cents: -3 }, { cents: 4 }])
      .respond(() => ({ status: 200, body: null }));
    const error = await engine.runOnce(parent, { tenantId: "fbs", key: "p1", input: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(IdempoError);
    expect((error as Error).message).toMatch(/child 2/);
    expect(await childCount(t.db, "fbs", "p1")).toBe(0);
    expect((await engine.inspect("fbs", "p1"))?.status).toBe("parked");
  });

  it("an empty map moves on at once with an empty array", async () => {
    const engine = createEngine({ db: t.db });
    const parent = workflow("fbe_parent")
      .map("fan", plainChild("fbe_child"), () => [])
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    expect(await engine.runOnce(parent, { tenantId: "fbe", key: "p1", input: {} })).toMatchObject({
      status: 200,
      body: [],
      outcome: "succeeded",
    });
  });
});
