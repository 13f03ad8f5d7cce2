/**
 * Duplicate storms on one parent key, on real parallel connections from two
 * engines: sixteen `runOnce` calls at once create the children once and one
 * caller gets the 202; sixteen `enqueue` calls in their own transactions
 * create one run and one set of children; twelve callers racing to fan in a
 * due parent run the item after the map once. Children are created in the
 * transaction that records the item's start, so no child starts twice.
 */
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { deriveChildKey, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { childCount, echoChild, indexedInput, statusOf, twoProcesses, until, worker } from "./support/fanout.ts";
import { settle } from "./support/faults.ts";

const t = useClonedDatabase("idempo_fanout_storms", { pool: 12 });

describe("duplicate storms on one parent key", () => {
  it("sixteen runOnce at once on two engines: the children are created once, one caller gets the 202", async () => {
    const [a, b] = twoProcesses(t, 8);
    let planned = 0;
    const child = echoChild("fs_run_child");
    const parent = workflow("fs_run_parent")
      .map("fan", child, () => {
        planned++;
        return [0, 1, 2, 3].map((i) => ({ i }));
      })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    const { values, errors } = await settle(
      Array.from({ length: 16 }, (_, i) =>
        (i % 2 === 0 ? a : b).runOnce(parent, { tenantId: "fs_run", key: "p1", input: {} }),
      ),
    );
    expect(values.map((v) => v.outcome)).toEqual(["suspended"]);
    expect(errors.every((e) => e instanceof IdempotencyKeyInProgressError)).toBe(true);
    expect(await childCount(t.db, "fs_run", "p1")).toBe(4);
    expect(planned).toBe(1);
    worker(a, { workflows: [parent] });
    worker(b, { workflows: [parent] });
    await until(async () => (await statusOf(t.db, "fs_run", "p1")) === "completed", "the parent completes");
    expect((await a.runOnce(parent, { tenantId: "fs_run", key: "p1", input: {} })).body).toEqual([0, 1, 2, 3]);
  });

  it("sixteen enqueues at once in their own transactions: one creates the run, one set of children", async () => {
    const [a, b] = twoProcesses(t, 8);
    const calls = new Map<number, number>();
    const child = workflow("fs_enq_child")
      .input(indexedInput)
      .step("s", ({ input }) => {
        calls.set(input.i, (calls.get(input.i) ?? 0) + 1);
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const parent = workflow("fs_enq_parent")
      .map("fan", child, () => [0, 1, 2].map((i) => ({ i })))
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    const created = await Promise.all(
      Array.from({ length: 16 }, (_, i) => {
        const e = i % 2 === 0 ? a : b;
        return t.db.transaction().execute((tx) => e.enqueue(tx, parent, { tenantId: "fs_enq", key: "p1", input: {} }));
      }),
    );
    expect(created.filter((c) => c.created)).toHaveLength(1);
    worker(a, { workflows: [parent], concurrency: 4, intervalMs: 10 });
    worker(b, { workflows: [parent], concurrency: 4, intervalMs: 10 });
    await until(async () => (await statusOf(t.db, "fs_enq", "p1")) === "completed", "the parent completes");
    expect([...calls.entries()].sort()).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
    ]);
    expect(await childCount(t.db, "fs_enq", "p1")).toBe(3);
  });

  it("twelve callers racing to fan in a due parent: the item after it runs once", async () => {
    const [a, b] = twoProcesses(t, 8);
    let afterRuns = 0;
    const child = echoChild("fs_fanin_child");
    const parent = workflow("fs_fanin_parent")
      .map("fan", child, () => [0, 1, 2].map((i) => ({ i })))
      .step("after", ({ state }) => {
        afterRuns++;
        return { total: state.fan.reduce((n, r) => n + (r.outcome === "succeeded" ? r.body : 0), 0) };
      })
      .respond(({ state }) => ({ status: 200, body: state.total }));
    await a.runOnce(parent, { tenantId: "fs_fanin", key: "p1", input: {} });
    // The children run in callers (due runs are takeable by runOnce), which makes the parent due.
    for (const i of [0, 1, 2]) {
      const key = deriveChildKey("fs_fanin", "p1", "fs_fanin_parent", "fan", i);
      expect((await b.runOnce(child, { tenantId: "fs_fanin", key, input: { i } })).status).toBe(200);
    }
    const { values, errors } = await settle(
      Array.from({ length: 12 }, (_, i) =>
        (i % 2 === 0 ? a : b).runOnce(parent, { tenantId: "fs_fanin", key: "p1", input: {} }),
      ),
    );
    expect(afterRuns).toBe(1);
    expect(values.every((v) => v.status === 200 && v.body === 3)).toBe(true);
    expect(values.filter((v) => !v.replayed)).toHaveLength(1);
    expect(errors.every((e) => e instanceof IdempotencyKeyInProgressError)).toBe(true);
  });
});
