/**
 * Field faults of the kind "serialization": values JSON cannot represent
 * faithfully must be refused with an IdempoError naming the path before any
 * SQL is sent (not crash the claim, not silently become `{}`), and values
 * JSON does represent must fingerprint the way JSON sees them.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine } from "../src/index.ts";
import {
  createEngine,
  IdempoError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  UnstorableValueError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { countIdempoRows, countRuns, rejectionOf, useLoggedDb } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const logged = useLoggedDb(t);
let engine: Engine;
const calls = new Map<string, number>();
const count = (key: string) => calls.set(key, (calls.get(key) ?? 0) + 1);

const anyJson = workflow("any_json")
  .phase("count", ({ key }) => {
    count(key);
    return {};
  })
  .respond(({ key }) => ({ status: 201, body: { n: calls.get(key) } }));

const scheduled = workflow("schedule")
  .input(z.object({ at: z.coerce.date() }))
  .phase("book", ({ key, input }) => {
    count(key);
    expect(input.at).toBeInstanceOf(Date);
    return { at: input.at.toISOString() };
  })
  .respond(({ state }) => ({ status: 201, body: state }));

beforeAll(() => {
  // The engine under test sends every statement through the logging Kysely.
  engine = createEngine({ db: logged.db, leaseMs: 1000 });
});

const run = (key: string, input: unknown) => engine.runOnce(anyJson, { tenantId: "t1", key, input: input as never });

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}
class Token {
  #secret: string;
  constructor(secret: string) {
    this.#secret = secret;
  }
  peek() {
    return this.#secret;
  }
}

describe("serialization: Date against its ISO string (BR-04)", () => {
  it("replays {at: Date} against {at: ISO string} with z.coerce.date()", async () => {
    const first = await engine.runOnce(scheduled, {
      tenantId: "t1",
      key: "date1",
      input: { at: new Date("2024-01-01T00:00:00Z") },
    });
    const again = await engine.runOnce(scheduled, {
      tenantId: "t1",
      key: "date1",
      input: { at: "2024-01-01T00:00:00.000Z" },
    });
    expect(first).toMatchObject({ status: 201, replayed: false, body: { at: "2024-01-01T00:00:00.000Z" } });
    expect(again).toEqual({ ...first, replayed: true });
    expect(calls.get("date1")).toBe(1);
    // The logging Kysely really sees the engine's statements (so "no SQL" below can fail).
    expect(logged.queries.some((q) => /claim_new_key/.test(q))).toBe(true);
    expect((await engine.inspect("t1", "date1"))?.input).toEqual({ at: "2024-01-01T00:00:00.000Z" });
  });
});

describe("serialization: values JSON cannot represent are refused before any SQL (BR-04)", () => {
  const cyclic: Record<string, unknown> = { id: 1 };
  cyclic.parent = { child: cyclic };

  it.each([
    ["BigInt", { amount: 10n }, "$.amount"],
    ["NaN", { amount: Number.NaN }, "$.amount"],
    ["Infinity", { amount: Number.POSITIVE_INFINITY }, "$.amount"],
    ["a function", { amount: () => 10 }, "$.amount"],
    ["a symbol", { amount: Symbol("ten") }, "$.amount"],
    ["a cyclic object", { order: cyclic }, "$.order.parent.child"],
    ["a nested BigInt", { lines: [{ qty: 1 }, { qty: 2n }] }, "$.lines[1].qty"],
    ["a Set", { tags: new Set(["a"]) }, "$.tags"],
    ["a Map", { tags: new Map([["a", 1]]) }, "$.tags"],
    ["a class instance", { at: new Point(1, 2) }, "$.at"],
    ["a class with only #private fields", { token: new Token("s") }, "$.token"],
  ])("%s: an IdempoError naming %s, zero rows, no SQL", async (_kind, input, path) => {
    const rowsBefore = await countIdempoRows(t.db);
    const sentBefore = logged.queries.length;
    const error = await rejectionOf(run("k2", input));
    expect(logged.queries.length - sentBefore).toBe(0);
    expect(error).toBeInstanceOf(IdempoError);
    expect(error).toBeInstanceOf(InputValidationError);
    expect(error).not.toBeInstanceOf(TypeError);
    expect(error).toMatchObject({ code: "invalid_input", httpStatus: 400 });
    expect((error as InputValidationError).issues.map((i) => i.path)).toContain(path);
    expect(error.message).toContain(path);
    expect(await countIdempoRows(t.db)).toBe(rowsBefore);
    expect(await countRuns(t.db, { key: "k2" })).toBe(0);
    expect(calls.get("k2")).toBeUndefined();
  });

  it.each([
    ["Set", new Set(["a"]), new Set(["b"])],
    ["Map", new Map([["a", 1]]), new Map([["b", 2]])],
    ["#private class", new Token("a"), new Token("b")],
  ])("never lets two %s values that JSON turns into {} share a record", async (_kind, first, second) => {
    expect(JSON.stringify(first)).toBe(JSON.stringify(second));
    const key = `k3-${_kind}`;
    expect(await rejectionOf(run(key, { tags: first }))).toBeInstanceOf(InputValidationError);
    expect(await rejectionOf(run(key, { tags: second }))).toBeInstanceOf(InputValidationError);
    expect(await countRuns(t.db, { key })).toBe(0);
  });
});

describe("serialization: JSON semantics for undefined and numbers (BR-04)", () => {
  it("replays {a:1, b:undefined} against {a:1}, and [undefined] against [null]", async () => {
    const a = await run("u1", { a: 1, b: undefined });
    expect(await run("u1", { a: 1 })).toEqual({ ...a, replayed: true });
    const b = await run("u2", [undefined]);
    expect(await run("u2", [null])).toEqual({ ...b, replayed: true });
    expect([calls.get("u1"), calls.get("u2")]).toEqual([1, 1]);
    // null is a value, not an absence.
    expect(await rejectionOf(run("u1", { a: 1, b: null }))).toBeInstanceOf(IdempotencyKeyMismatchError);
  });

  it("replays -0 against 0, and 1e21 against 1000000000000000000000", async () => {
    const z0 = await run("n1", { v: -0 });
    expect(await run("n1", { v: 0 })).toEqual({ ...z0, replayed: true });
    const big = await run("n2", { v: 1e21 });
    expect(await run("n2", { v: 1000000000000000000000 })).toEqual({ ...big, replayed: true });
    expect([calls.get("n1"), calls.get("n2")]).toEqual([1, 1]);
    expect((await engine.inspect("t1", "n1"))?.input).toEqual({ v: 0 });
  });
});

describe("serialization: results and bodies that cannot be stored name where they came from", () => {
  it("a phase returning a BigInt fails naming the phase; its writes and progress roll back", async () => {
    const wf = workflow("bad_phase")
      .phase("ok", () => ({ a: 1 }))
      .phase("price", () => ({ total: 10n }))
      .respond(() => ({ status: 201, body: {} }));
    const error = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "r1", input: {} }));
    expect(error).toBeInstanceOf(UnstorableValueError);
    expect(error.message).toContain("phase 'price'");
    expect((error as UnstorableValueError).issues[0]?.path).toBe("$.total");
    // No retry can store it: the run is parked at its last recovery point.
    expect(await engine.inspect("t1", "r1")).toMatchObject({
      status: "parked",
      recoveryPoint: "ok",
      state: { a: 1 },
    });
  });

  it("a respond body holding a Map fails naming respond; the run does not complete with a broken body", async () => {
    const wf = workflow("bad_body")
      .phase("only", () => ({ a: 1 }))
      .respond(() => ({ status: 201, body: { lookup: new Map([["a", 1]]) } }));
    const error = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "r2", input: {} }));
    expect(error).toBeInstanceOf(UnstorableValueError);
    expect(error.message).toContain("respond");
    expect(await engine.inspect("t1", "r2")).toMatchObject({
      status: "parked",
      recoveryPoint: null,
      response: null,
    });
  });

  it("a step result is stored as the JSON a resume will see (Date -> ISO string)", async () => {
    const wf = workflow("dated_step")
      .step("stamp", () => ({ at: new Date("2024-05-05T05:05:05Z"), skip: undefined }))
      .respond(({ state }) => ({ status: 200, body: state }));
    const res = await engine.runOnce(wf, { tenantId: "t1", key: "r3", input: {} });
    expect(res.body).toEqual({ at: "2024-05-05T05:05:05.000Z" });
    expect(JSON.stringify((await engine.runOnce(wf, { tenantId: "t1", key: "r3", input: {} })).body)).toBe(
      JSON.stringify(res.body),
    );
  });
});

describe("serialization: what workflow code sees is the stored JSON, fixed at the claim", () => {
  it("stores and replays NUL in values and keys (json keeps the escape that text could not hold)", async () => {
    const wf = workflow("nul_echo")
      .phase("p", ({ input }) => ({ echo: input }))
      .respond(({ state }) => ({ status: 200, body: { ...state, "k\u0000": "v\u0000" } }));
    const input = { s: "a\u0000b" };
    const first = await engine.runOnce(wf, { tenantId: "t1", key: "nul1", input });
    expect(first.body).toEqual({ echo: input, "k\u0000": "v\u0000" });
    expect(await engine.runOnce(wf, { tenantId: "t1", key: "nul1", input })).toEqual({ ...first, replayed: true });
  });

  it("a phase cannot mutate a zod-coerced Date in the input: the resumed step sends what attempt 1 sent", async () => {
    // deepFreeze freezes the Date object, but a frozen Date still has
    // working setters (its time is an internal slot, not a property).
    const sent: string[] = [];
    const wf = workflow("dated_charge")
      .input(z.object({ at: z.coerce.date() }))
      .phase("prepare", ({ input }) => {
        try {
          input.at.setUTCFullYear(2030);
        } catch {
          // refusing the mutation is fine too
        }
        return {};
      })
      .step("notify", ({ input }) => {
        sent.push(input.at.toISOString());
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const crashing = createEngine({ db: logged.db, leaseMs: 1000 });
    setFaultHook(crashing, (point, run) => {
      if (point === "called:step:notify" && run.attempt === 1) throw new CrashSignal(point);
    });
    const input = { at: "2024-01-01T00:00:00.000Z" };
    expect(await rejectionOf(crashing.runOnce(wf, { tenantId: "t1", key: "date2", input }))).toBeInstanceOf(
      CrashSignal,
    );
    expect(await crashing.release("t1", "date2")).toMatchObject({ status: "in_flight", ownerToken: null });
    await crashing.runOnce(wf, { tenantId: "t1", key: "date2", input });
    expect(sent).toHaveLength(2);
    expect(sent[1]).toBe(sent[0]);
    expect(sent[0]).toBe("2024-01-01T00:00:00.000Z");
  });
});
