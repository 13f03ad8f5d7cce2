/**
 * How the end of a parent reaches its children: canceling the top run of
 * a tree cancels its child and the child's own children, and a map's
 * `timeoutMs` racing its last children ends each parent one way or the
 * other, consistently (every child succeeded and read, or a stored 408
 * with the rest canceled), with no child's effect twice.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { statusOf, twoProcesses, until, worker } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useClonedDatabase("idempo_fanout_cancel", { pool: 12 });

describe("cancel reaches grandchildren", () => {
  // fan-out.md: "cancels ... its children that have not completed, and theirs in turn".
  it("canceling the top run cancels the child and the child's own children", async () => {
    const engine = createEngine({ db: t.db });
    const running = latch("a grandchild runs", 60_000);
    const leaf = workflow("fcg_leaf", { leaseMs: 1_500 })
      .step("s", async ({ signal }) => {
        running.open();
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      })
      .respond(() => ({ status: 200, body: null }));
    const middle = workflow("fcg_middle")
      .map("leaves", leaf, () => [{}, {}, {}], { concurrency: 1 })
      .respond(() => ({ status: 200, body: null }));
    const top = workflow("fcg_top")
      .child("mid", middle, () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(top, { tenantId: "fcg", key: "t1", input: {} });
    worker(engine, { workflows: [top] });
    await running.wait();
    await engine.cancel("fcg", "t1");
    const mid = deriveChildKey("fcg", "t1", "fcg_top", "mid", 0);
    const { rows } = await sql<{ key: string; status: string; outcome: string | null }>`
      SELECT key, status, outcome FROM idempo.runs WHERE tenant_id = 'fcg' AND key <> 't1' ORDER BY key`.execute(t.db);
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.status === "completed" && r.outcome === "canceled")).toBe(true);
    expect(rows.map((r) => r.key)).toContain(mid);
  });
});

describe("timeoutMs racing the last child", () => {
  // fan-out.md: "Past it the parent completes with a stored 408 ... and its children that have not completed
  // are canceled"; a parent that read every child completed moves past the item with their results.
  it("eight parents whose children finish around the deadline: each ends consistently, no child twice", async () => {
    const [a, b] = twoProcesses(t, 6);
    const effects = new Map<string, number>();
    const child = workflow("fct_child", { leaseMs: 1_000 })
      .input(z.object({ ms: z.number().int() }))
      .step("s", async ({ input, idempotencyKey }) => {
        await sleep(input.ms);
        effects.set(idempotencyKey, (effects.get(idempotencyKey) ?? 0) + 1);
        return {};
      })
      .respond(() => ({ status: 201, body: "done" }));
    const parent = workflow("fct_parent")
      .input(z.object({ n: z.number().int() }))
      .map("fan", child, ({ input }) => [0, 1, 2].map((i) => ({ ms: ((input.n * 7 + i * 13) % 9) * 40 })), {
        timeoutMs: 200,
      })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.outcome) }));
    const keys = Array.from({ length: 8 }, (_, n) => `p${n}`);
    await Promise.all(keys.map((key, n) => a.runOnce(parent, { tenantId: "fct", key, input: { n } })));
    worker(a, { workflows: [parent], concurrency: 10, intervalMs: 20 });
    worker(b, { workflows: [parent], concurrency: 10, intervalMs: 20 });
    for (const key of keys) {
      await until(async () => (await statusOf(t.db, "fct", key)) === "completed", `${key} completes`);
    }
    await until(async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = 'fct' AND parent_key IS NOT NULL
          AND status <> 'completed'`.execute(t.db);
      return rows[0]?.n === 0;
    }, "every child ended");
    for (const key of keys) {
      const rec = await a.inspect("fct", key);
      const response = rec?.status === "completed" ? rec.response : undefined;
      const outcomes = rec?.children?.map((c) => c.outcome);
      if (response?.status === 200) {
        expect(response.body).toEqual(["succeeded", "succeeded", "succeeded"]);
        expect(outcomes).toEqual(["succeeded", "succeeded", "succeeded"]);
      } else {
        expect(response).toMatchObject({ status: 408, outcome: "failed", body: { code: "children_timeout" } });
        expect(outcomes?.every((o) => o === "succeeded" || o === "canceled")).toBe(true);
      }
    }
    expect([...effects.values()].every((n) => n === 1)).toBe(true);
  });
});
