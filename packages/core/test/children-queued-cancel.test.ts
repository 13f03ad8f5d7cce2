/**
 * A `.map`'s `concurrency` under an operator's cancel of its children: a
 * child's completion makes the next queued sibling due only when the child
 * held a runnable place, so canceling children that were still queued
 * never makes more than `concurrency` runnable, and canceling a runnable
 * one hands its place on (the completion trigger, migrations 0020 and
 * 0024; docs/fan-out.md). Counted from the rows and from the calls a
 * worker makes.
 */
import { describe, expect, it, onTestFinished } from "vitest";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { echoChild, indexedInput, runnableChildren, statusOf, until, worker } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useTestDatabase({ name: "idempo_queued_cancel" });

describe(".map concurrency under operator verbs", () => {
  // fan-out.md: "`.map`'s `concurrency` ... bounds how many of the item's children are runnable (due or
  // running) at once ... It holds across every worker and process, since it is decided in the database."
  // Before 0024 each cancel of a queued child completed it, and the completion trigger made the next queued
  // sibling due although the canceled child held no runnable place: two cancels left four children runnable
  // and a worker executed four at once under concurrency 2.
  it("canceling queued children never makes more than `concurrency` children runnable", async () => {
    const engine = createEngine({ db: t.db });
    const release = latch("children may finish");
    onTestFinished(() => release.open());
    let executing = 0;
    let most = 0;
    const child = workflow("aq_child")
      .input(indexedInput)
      .step("s", async ({ input }) => {
        executing++;
        most = Math.max(most, executing);
        await release.wait();
        executing--;
        return { i: input.i };
      })
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const parent = workflow("aq_parent")
      .map("fan", child, () => [0, 1, 2, 3, 4, 5].map((i) => ({ i })), { concurrency: 2 })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.outcome) }));
    await engine.runOnce(parent, { tenantId: "aq", key: "p1", input: {} });
    expect(await runnableChildren(t.db, "aq", "p1")).toBe(2);
    // An operator cancels two children that are still queued (not runnable).
    await engine.cancel("aq", deriveChildKey("aq", "p1", "aq_parent", "fan", 5));
    await engine.cancel("aq", deriveChildKey("aq", "p1", "aq_parent", "fan", 4));
    const afterCancel = await runnableChildren(t.db, "aq", "p1");
    worker(engine, { workflows: [parent], concurrency: 10 });
    await sleep(1_500);
    const mostExecuting = most;
    release.open();
    await until(async () => (await statusOf(t.db, "aq", "p1")) === "completed", "the parent completes");
    expect({ afterCancel, mostExecuting }).toEqual({ afterCancel: 2, mostExecuting: 2 });
  });

  // The other side of the same rule: a child that held a place (due, not queued) gives it to the next one.
  it("canceling a runnable child makes the next queued one due, and the map still ends", async () => {
    const engine = createEngine({ db: t.db });
    const child = echoChild("ar_child");
    const parent = workflow("ar_parent")
      .map("fan", child, () => [0, 1, 2].map((i) => ({ i })), { concurrency: 1 })
      .respond(({ state }) => ({ status: 200, body: state.fan.map((r) => r.outcome) }));
    await engine.runOnce(parent, { tenantId: "ar", key: "p1", input: {} });
    const first = deriveChildKey("ar", "p1", "ar_parent", "fan", 0);
    expect(await runnableChildren(t.db, "ar", "p1")).toBe(1);
    await engine.cancel("ar", first);
    expect(await runnableChildren(t.db, "ar", "p1")).toBe(1);
    expect(await statusOf(t.db, "ar", deriveChildKey("ar", "p1", "ar_parent", "fan", 1))).toBe("suspended");
    worker(engine, { workflows: [parent] });
    await until(async () => (await statusOf(t.db, "ar", "p1")) === "completed", "the parent completes");
    const done = await engine.inspect("ar", "p1");
    expect(done?.status === "completed" && done.response?.body).toEqual(["canceled", "succeeded", "succeeded"]);
  });
});
