/**
 * `.child(name, wf, input, { timeoutMs })`: the options a `.child` item
 * takes (only `timeoutMs`, as `.map` has it) are checked like every
 * options object and honoured, never dropped: past the timeout the parent
 * completes with the stored 408 (`children_timeout`) a `.map` gets, and
 * its child that has not completed is canceled.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, deriveChildKey, InvalidOptionError, workflow } from "../src/index.ts";

const t = useClonedDatabase("idempo_child_timeout", { pool: 6 });

const until = async (check: () => Promise<boolean>, what: string) => {
  // Bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 30_000, interval: 25, message: what }).toBe(true);
};

async function completed(tenantId: string, key: string): Promise<boolean> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status === "completed";
}

const child = workflow("abo_child")
  .step("s", () => ({}))
  .respond(() => ({ status: 200, body: null }));

describe(".child's options", () => {
  it("an options object given to .child is refused or honoured, never dropped", () => {
    const wf = workflow("abo_parent")
      .child("c", child, () => ({}), { timeoutMs: 1_000 })
      .respond(() => ({ status: 200, body: null }));
    expect(wf.definition.items[0]).toMatchObject({ kind: "child", options: { timeoutMs: 1_000 } });
  });

  it("refuses what a .child does not take, naming it, and a timeoutMs out of range", () => {
    const refusal = (build: () => unknown): unknown => {
      try {
        build();
      } catch (error) {
        return error;
      }
      return undefined;
    };
    const misspelt = refusal(() => workflow("w").child("c", child, () => ({}), { timeOutMs: 5 } as never));
    expect(misspelt).toBeInstanceOf(InvalidOptionError);
    expect((misspelt as Error).message).toMatch(/timeOutMs/);
    expect((misspelt as Error).message).toMatch(/timeoutMs/);
    // `concurrency` is a `.map`'s: one child has nothing to bound.
    expect(refusal(() => workflow("w").child("c", child, () => ({}), { concurrency: 2 } as never))).toBeInstanceOf(
      InvalidOptionError,
    );
    for (const timeoutMs of [0, -5, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(refusal(() => workflow("w").child("c", child, () => ({}), { timeoutMs }))).toBeInstanceOf(
        InvalidOptionError,
      );
    }
    expect(refusal(() => workflow("w").child("c", child, () => ({}), "x" as never))).toBeInstanceOf(InvalidOptionError);
    // No options, or an empty object, is no timeout.
    expect(
      workflow("w")
        .child("c", child, () => ({}))
        .respond(() => ({ status: 200, body: null })).definition.items[0],
    ).toMatchObject({ options: {} });
  });

  it("timeoutMs: the item fails for good with the 408 a map gets, and the child still running is canceled", async () => {
    const engine = createEngine({ db: t.db });
    const stuck = workflow("cto_stuck", { leaseMs: 1_500 })
      .step(
        "wait",
        ({ signal }) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
      )
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("cto_parent")
      .child("only", stuck, () => ({}), { timeoutMs: 300 })
      .respond(() => ({ status: 200, body: "not reached" }));
    const first = await engine.runOnce(parent, { tenantId: "cto", key: "p1", input: {} });
    expect(first.outcome).toBe("suspended");
    const w = engine.startWorker({ workflows: [parent], sweep: false, schedules: false, intervalMs: 50 });
    onTestFinished(() => w.stop());
    await until(() => completed("cto", "p1"), "the parent times out");
    const kid = deriveChildKey("cto", "p1", "cto_parent", "only", 0);
    await until(() => completed("cto", kid), "the child is canceled");
    const rec = await engine.inspect("cto", "p1");
    expect(rec?.response?.status).toBe(408);
    expect(rec?.response?.outcome).toBe("failed");
    expect(rec?.response?.body).toMatchObject({ code: "children_timeout" });
    expect((rec?.response?.body as { detail?: string } | undefined)?.detail).toMatch(/child 'only'/);
    expect(rec?.children?.map((c) => [c.index, c.status, c.outcome])).toEqual([[0, "completed", "canceled"]]);
    expect(rec?.history?.find((h) => h.kind === "child")?.outcome).toBe("failed");
    // Replayed as stored.
    expect(await engine.runOnce(parent, { tenantId: "cto", key: "p1", input: {} })).toMatchObject({
      status: 408,
      replayed: true,
    });
  });
});
