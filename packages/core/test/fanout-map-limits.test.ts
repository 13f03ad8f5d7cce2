/**
 * What a `.map` stores about its children beyond their inputs: at most
 * MAX_CHILDREN (10 000) of them, inputs over it parking the parent with a
 * typed error before any child is written; and each child's priority, its
 * workflow's `.priority` as `enqueue` stores it, so workers take a child by
 * priority as they take an enqueued run. Read from the rows.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, type IdempoError, UnstorableValueError, workflow } from "../src/index.ts";
import { childCount } from "./support/fanout.ts";

const t = useClonedDatabase("idempo_fanout_map_limits", { pool: 4 });

const plainChild = (name: string) =>
  workflow(name)
    .step("s", () => ({}))
    .respond(() => ({ status: 200, body: null }));

describe("the number of a map's children", () => {
  // fan-out.md: "A `.map` starts at most 10 000 children"; SPEC: a value that cannot be stored parks the run
  // with a clear, typed error. Before, the bound was declared (for `concurrency`) but inputs over it were written.
  it("10 001 inputs park the parent with UnstorableValueError naming the bound; no child is written", async () => {
    const engine = createEngine({ db: t.db });
    const parent = workflow("fml_parent")
      .map("fan", plainChild("fml_child"), () => Array.from({ length: 10_001 }, () => ({})))
      .respond(() => ({ status: 200, body: null }));
    const error = await engine.runOnce(parent, { tenantId: "fml", key: "p1", input: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UnstorableValueError);
    expect((error as IdempoError).code).toBe("unstorable_value");
    expect((error as Error).message).toMatch(/at most 10000 .*got 10001/);
    expect(await childCount(t.db, "fml", "p1")).toBe(0);
    expect((await engine.inspect("fml", "p1"))?.status).toBe("parked");
  }, 60_000);
});

describe("the priority of a child", () => {
  // SPEC: "Priorities: workflow option `.priority(n)` and `enqueue(..., { priority })` ... workers take due runs
  // by priority"; enqueue stores the workflow's `.priority`. Before, children were written with no priority.
  it("children store their workflow's .priority, as enqueue does; none set stays null", async () => {
    const engine = createEngine({ db: t.db });
    const urgent = workflow("fmp_urgent")
      .priority(7)
      .step("s", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("fmp_parent")
      .map("fan", urgent, () => [{}, {}], { concurrency: 1 })
      .respond(() => ({ status: 200, body: null }));
    const other = workflow("fmp_other")
      .child("plain", plainChild("fmp_plain"), () => ({}))
      .respond(() => ({ status: 200, body: null }));
    expect((await engine.runOnce(parent, { tenantId: "fmp", key: "p1", input: {} })).status).toBe(202);
    expect((await engine.runOnce(other, { tenantId: "fmp", key: "p2", input: {} })).status).toBe(202);
    await engine.enqueue(t.db, urgent, { tenantId: "fmp", key: "e1", input: {} });
    const { rows } = await sql<{ key: string; parent_item: string | null; priority: number | null }>`
      SELECT key, parent_item, priority FROM idempo.runs WHERE tenant_id = 'fmp' AND key NOT IN ('p1', 'p2')
      ORDER BY parent_item NULLS FIRST, child_index`.execute(t.db);
    expect(rows.map((r) => [r.parent_item, r.priority])).toEqual([
      [null, 7],
      ["fan", 7],
      ["fan", 7],
      ["plain", null],
    ]);
  });
});
