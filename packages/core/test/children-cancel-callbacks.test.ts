/**
 * A `.map` or `.child` item never runs the user's code while it holds its
 * parent's row lock: `accepted` (the 202 of the suspension) and `respond`
 * (the move past the last item) run before the item's transaction, so
 * `engine.cancel` of the parent from another process returns while they
 * are still running, and the item's transaction, fenced by the owner
 * token, then writes nothing: no child is created after the cancel, and
 * the parent and every child end canceled. Two engines on their own pools;
 * the callbacks wait on latches the test opens only after the cancel
 * returned.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { workflow } from "../src/index.ts";
import { childCount, echoChild, runnableChildren, statusOf, twoProcesses, until, worker } from "./support/fanout.ts";
import { held, settled } from "./support/latch.ts";

const t = useClonedDatabase("idempo_children_cancel_callbacks", { pool: 8 });

/** Every run of the tenant as `status/outcome`, the parent's first. */
async function endings(tenantId: string, parent: string): Promise<string[]> {
  const { rows } = await sql<{ ending: string }>`
    SELECT status || '/' || coalesce(outcome, '-') AS ending FROM idempo.runs WHERE tenant_id = ${tenantId}
    ORDER BY key = ${parent} DESC, key`.execute(t.db);
  return rows.map((r) => r.ending);
}

describe("engine.cancel of a parent while its item's callback runs", () => {
  // SPEC: cancel "finish[es] a run that is in flight ... a live owner finds out at its next heartbeat or
  // write"; "Canceling a parent cancels its children that have not completed". Before, the map's start
  // locked the parent's row, then awaited `accepted` under the lock: the cancel waited as long as it ran.
  it("a map whose `accepted` is still running: cancel returns, no child is created, the parent ends canceled", async () => {
    const [a, b] = twoProcesses(t, 4);
    const { entered, gate, hold } = held("accepted");
    const parent = workflow("cca_parent")
      .map("fan", echoChild("cca_child"), () => [0, 1, 2].map((i) => ({ i })))
      .accepted(async () => {
        await hold();
        return { queued: true };
      })
      .respond(() => ({ status: 200, body: "not reached" }));
    const started = settled(a.runOnce(parent, { tenantId: "cca", key: "p1", input: {} }));
    await entered.wait();
    // Resolves while `accepted` is still waiting for the gate (the test's timeout catches a cancel that waits).
    await b.cancel("cca", "p1");
    expect(gate.opened).toBe(false);
    gate.open();
    const { result } = await started;
    expect(result?.status).not.toBe(202);
    expect(await childCount(t.db, "cca", "p1")).toBe(0);
    expect(await endings("cca", "p1")).toEqual(["completed/canceled"]);
  }, 60_000);

  // The same for the other callback the item called under the lock: `respond`, when the item is the
  // workflow's last and every child completed.
  it("a child's parent whose `respond` is still running: cancel returns, the parent ends canceled", async () => {
    const [a, b] = twoProcesses(t, 4);
    const { entered, gate, hold } = held("respond");
    const parent = workflow("ccr_parent")
      .child("one", echoChild("ccr_child"), () => ({ i: 7 }))
      .respond(async ({ state }) => {
        await hold();
        return { status: 200, body: state.one.body };
      });
    expect((await a.runOnce(parent, { tenantId: "ccr", key: "p1", input: {} })).status).toBe(202);
    worker(a, { workflows: [parent] });
    await entered.wait();
    expect(await runnableChildren(t.db, "ccr", "p1")).toBe(0);
    await b.cancel("ccr", "p1");
    expect(gate.opened).toBe(false);
    gate.open();
    await until(async () => (await statusOf(t.db, "ccr", "p1")) === "completed", "the parent ended");
    expect(await endings("ccr", "p1")).toEqual(["completed/canceled", "completed/succeeded"]);
    expect((await a.inspect("ccr", "p1"))?.response).toMatchObject({ status: 409, outcome: "canceled" });
  }, 60_000);
});
