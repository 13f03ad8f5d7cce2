/**
 * Limits on the children of a map, decided in the database: a child
 * workflow's `.concurrency` (max 2) holds across two workers running twelve
 * children, sampled in process and from the slot table, each child called
 * once; and a map of many children derives a distinct, stable key for each
 * while only `concurrency` of them are runnable.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { echoChild, indexedInput, runnableChildren, statusOf, twoProcesses, until, worker } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";

const t = useClonedDatabase("idempo_fanout_concurrency", { pool: 12 });

describe(".concurrency on the children of a map", () => {
  // SPEC: "at most `max` attempts with the same key execute at once across every process that shares the
  // database".
  it("two workers, twelve children, max 2: never more than two execute, and the slot table agrees", async () => {
    const [a, b] = twoProcesses(t, 6);
    let executing = 0;
    let most = 0;
    let mostHeld = 0;
    const calls = new Map<number, number>();
    const sampleSlots = () =>
      sql<{ n: number }>`SELECT idempo.concurrency_slots_held(${"fcl_child\u001facct-1"}, 2) AS n`
        .execute(t.db)
        .then(({ rows }) => {
          mostHeld = Math.max(mostHeld, rows[0]?.n ?? 0);
        });
    const child = workflow("fcl_child")
      .input(indexedInput)
      .concurrency({ key: () => "acct-1", max: 2 })
      .step("s", async ({ input }) => {
        executing++;
        most = Math.max(most, executing);
        calls.set(input.i, (calls.get(input.i) ?? 0) + 1);
        // Sampled while this child holds its slot, and between children by the interval below.
        await sampleSlots();
        await sleep(40);
        executing--;
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const parent = workflow("fcl_parent")
      .map("fan", child, () => Array.from({ length: 12 }, (_, i) => ({ i })), { concurrency: 6 })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.body) }));
    await a.runOnce(parent, { tenantId: "fcl", key: "p1", input: {} });
    const sampler = setInterval(() => void sampleSlots().catch(() => undefined), 5);
    onTestFinished(() => clearInterval(sampler));
    worker(a, { workflows: [parent], concurrency: 10, intervalMs: 20 });
    worker(b, { workflows: [parent], concurrency: 10, intervalMs: 20 });
    await until(async () => (await statusOf(t.db, "fcl", "p1")) === "completed", "the parent completes");
    clearInterval(sampler);
    expect(most).toBeLessThanOrEqual(2);
    expect(mostHeld).toBeLessThanOrEqual(2);
    expect(mostHeld).toBeGreaterThan(0);
    expect([...calls.values()]).toEqual(Array(12).fill(1));
    expect((await a.runOnce(parent, { tenantId: "fcl", key: "p1", input: {} })).body).toEqual(
      Array.from({ length: 12 }, (_, i) => i),
    );
  });
});

describe("a map of many children", () => {
  it("a map of 2 000 children: distinct stable keys, at most `concurrency` runnable", async () => {
    const engine = createEngine({ db: t.db });
    const child = echoChild("fch_child");
    const parent = workflow("fch_parent")
      .map("fan", child, () => Array.from({ length: 2_000 }, (_, i) => ({ i })), { concurrency: 7 })
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(parent, { tenantId: "fch", key: "p1", input: {} })).outcome).toBe("suspended");
    const { rows } = await sql<{ key: string; child_index: number }>`
      SELECT key, child_index FROM idempo.runs WHERE tenant_id = 'fch' AND parent_key = 'p1' ORDER BY child_index`.execute(
      t.db,
    );
    expect(rows).toHaveLength(2_000);
    expect(new Set(rows.map((r) => r.key)).size).toBe(2_000);
    expect(rows.every((r) => r.key === deriveChildKey("fch", "p1", "fch_parent", "fan", r.child_index))).toBe(true);
    expect(await runnableChildren(t.db, "fch", "p1")).toBe(7);
  });
});
