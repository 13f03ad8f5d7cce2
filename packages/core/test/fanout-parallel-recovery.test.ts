/**
 * What a parallel item keeps when an attempt does not finish: a crash after
 * a branch was called but before it recorded (branches one at a time) has
 * another engine call only that branch, with the key the first attempt
 * sent; a crash at every branch boundary never calls a recorded branch
 * again and keeps each branch's key; a branch result over
 * `maxPayloadBytes` parks the run while the other branch stays recorded.
 */
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import type { IdempoError } from "../src/index.ts";
import { createEngine, deriveStepKey, workflow } from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { hooked } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";

const t = useClonedDatabase("idempo_fanout_parallel_recovery", { pool: 8 });

describe("parallel under crashes", () => {
  it("concurrency 1, crash after c was called but before it recorded: another engine calls only c, same key", async () => {
    const first = createEngine({ db: t.db });
    const second = createEngine({ db: t.connect(4) });
    const calls: Record<string, string[]> = { a: [], b: [], c: [] };
    const branch =
      (name: string) =>
      ({ idempotencyKey }: { idempotencyKey: string }) => {
        calls[name]?.push(idempotencyKey);
        return { [name]: calls[name]?.length };
      };
    const wf = workflow("fpc")
      .parallel("fan", (p) => p.step("a", branch("a")).step("b", branch("b")).step("c", branch("c")), {
        concurrency: 1,
      })
      .respond(({ state }) => ({ status: 200, body: state.fan }));
    hooked(first, (point) => {
      if (point === "called:branch:fan/c") throw new CrashSignal(point);
    });
    await expect(first.runOnce(wf, { tenantId: "fpc", key: "k1", input: {} })).rejects.toBeInstanceOf(CrashSignal);
    await second.release("fpc", "k1");
    const res = await second.runOnce(wf, { tenantId: "fpc", key: "k1", input: {} });
    expect(res.body).toEqual({ a: { a: 1 }, b: { b: 1 }, c: { c: 2 } });
    const cKey = deriveStepKey("fpc", "k1", "fpc", "fan", "c");
    expect(calls).toEqual({
      a: [deriveStepKey("fpc", "k1", "fpc", "fan", "a")],
      b: [deriveStepKey("fpc", "k1", "fpc", "fan", "b")],
      c: [cKey, cKey],
    });
  });

  it("a crash at every branch boundary: each recorded branch is called once, each key stable", async () => {
    const points = ["a", "b", "c"].flatMap((b) => [
      `before:branch:fan/${b}`,
      `called:branch:fan/${b}`,
      `after:branch:fan/${b}`,
    ]);
    for (const [n, crashPoint] of points.entries()) {
      const engine = createEngine({ db: t.db });
      const calls: Record<string, string[]> = { a: [], b: [], c: [] };
      const wf = workflow(`fpx${n}`)
        .parallel("fan", (p) =>
          p
            .step("a", ({ idempotencyKey }) => void calls.a?.push(idempotencyKey))
            .step("b", ({ idempotencyKey }) => void calls.b?.push(idempotencyKey))
            .step("c", ({ idempotencyKey }) => void calls.c?.push(idempotencyKey)),
        )
        .respond(({ state }) => ({ status: 200, body: state.fan }));
      let crashed = false;
      hooked(engine, (point) => {
        if (point === crashPoint && !crashed) {
          crashed = true;
          throw new CrashSignal(point);
        }
      });
      await expect(engine.runOnce(wf, { tenantId: "fpx", key: `k${n}`, input: {} })).rejects.toBeInstanceOf(
        CrashSignal,
      );
      const rec = await engine.inspect("fpx", `k${n}`);
      const recorded = new Set(rec?.history?.filter((h) => h.outcome === "succeeded").map((h) => h.branch));
      await engine.release("fpx", `k${n}`);
      const res = await engine.runOnce(wf, { tenantId: "fpx", key: `k${n}`, input: {} });
      expect(res.body).toEqual({ a: null, b: null, c: null });
      for (const b of ["a", "b", "c"]) {
        const key = deriveStepKey("fpx", `k${n}`, `fpx${n}`, "fan", b);
        const got = calls[b] ?? [];
        expect(got.every((k) => k === key)).toBe(true);
        // A branch recorded before the crash is never called again.
        if (recorded.has(b)) expect(got).toHaveLength(1);
        expect(got.length).toBeGreaterThanOrEqual(1);
      }
    }
  });
});

describe("parallel stored values", () => {
  // fan-out.md: "a result that cannot be stored parks the run, as a step's does"; the running branches
  // settle and stay recorded.
  it("a branch result over maxPayloadBytes parks the run; the other branch stays recorded and is not called again", async () => {
    const engine = createEngine({ db: t.db, maxPayloadBytes: 1_000 });
    const calls = { big: 0, small: 0 };
    const wf = workflow("fpb")
      .parallel("fan", (p) =>
        p
          .step("big", () => {
            calls.big++;
            return { blob: "x".repeat(2_000) };
          })
          .step("small", async () => {
            calls.small++;
            await sleep(50);
            return { ok: true };
          }),
      )
      .respond(({ state }) => ({ status: 200, body: state.fan.small }));
    const error = await engine.runOnce(wf, { tenantId: "fpb", key: "k1", input: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as IdempoError | undefined)?.code).toBe("payload_too_large");
    const rec = await engine.inspect("fpb", "k1");
    expect(rec?.status).toBe("parked");
    expect(rec?.history?.filter((h) => h.branch === "small").map((h) => h.outcome)).toEqual(["succeeded"]);
    await engine.unpark("fpb", "k1");
    await expect(engine.runOnce(wf, { tenantId: "fpb", key: "k1", input: {} })).rejects.toMatchObject({
      code: "payload_too_large",
    });
    expect(calls).toEqual({ big: 2, small: 1 });
  });
});
