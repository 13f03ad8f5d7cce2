/**
 * A `.waitFor` item never runs the user's code while it holds its run's
 * row lock: `accepted` (the 202 of the suspension), `respond` (the move
 * past the last item) and the wait's schema (an async refinement of the
 * signal) run before the wait's transaction, so `engine.cancel` from
 * another process returns while they are still running, and the wait's
 * transaction, fenced by the owner token, then writes nothing: the run
 * ends canceled, not suspended and not completed by the wait. Two engines
 * on their own pools; the callbacks wait on latches the test opens only
 * after the cancel returned.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { workflow } from "../src/index.ts";
import { statusOf, twoProcesses, until, worker } from "./support/fanout.ts";
import { held, settled } from "./support/latch.ts";

const t = useClonedDatabase("idempo_wait_cancel_callbacks", { pool: 8 });

/** The run's `status/outcome` and its wait's history entries as `outcome`. */
async function ending(tenantId: string, key: string): Promise<{ run: string; wait: string[] }> {
  const { rows } = await sql<{ run: string }>`
    SELECT status || '/' || coalesce(outcome, '-') AS run FROM idempo.runs
    WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  const history = await sql<{ outcome: string }>`
    SELECT outcome FROM idempo.run_history WHERE tenant_id = ${tenantId} AND key = ${key} AND kind = 'wait'
    ORDER BY started_at`.execute(t.db);
  return { run: rows[0]?.run ?? "none", wait: history.rows.map((r) => r.outcome) };
}

describe("engine.cancel of a run while its wait's callback runs", () => {
  // SPEC: cancel "finish[es] a run that is in flight ... a live owner finds out at its next heartbeat or
  // write". Before, the wait locked the run's row, then suspended and awaited `accepted` under the lock:
  // the cancel waited as long as it ran.
  it("a wait suspending whose `accepted` is still running: cancel returns, the run ends canceled", async () => {
    const [a, b] = twoProcesses(t, 4);
    const { entered, gate, hold } = held("accepted");
    const wf = workflow("wca_wait")
      .waitFor("approval", { timeoutMs: 3_600_000 })
      .accepted(async () => {
        await hold();
        return { queued: true };
      })
      .respond(() => ({ status: 200, body: "not reached" }));
    const started = settled(a.runOnce(wf, { tenantId: "wca", key: "r1", input: {} }));
    await entered.wait();
    // Resolves while `accepted` is still waiting for the gate (the test's timeout catches a cancel that waits).
    await b.cancel("wca", "r1");
    expect(gate.opened).toBe(false);
    gate.open();
    const { result } = await started;
    expect(result?.status).not.toBe(202);
    expect(await ending("wca", "r1")).toEqual({ run: "completed/canceled", wait: [] });
    expect((await a.inspect("wca", "r1"))?.response).toMatchObject({ status: 409, outcome: "canceled" });
  }, 60_000);

  // `respond`, when the wait is the workflow's last item and its signal came: it ran under the lock too.
  it("a last wait whose signal came and whose `respond` is still running: cancel returns, the run ends canceled", async () => {
    const [a, b] = twoProcesses(t, 4);
    const { entered, gate, hold } = held("respond");
    const wf = workflow("wcr_wait")
      .waitFor("approval")
      .respond(async ({ state }) => {
        await hold();
        return { status: 200, body: state.approval };
      });
    expect((await a.runOnce(wf, { tenantId: "wcr", key: "r1", input: {} })).status).toBe(202);
    await a.signal("wcr", "r1", "approval", { ok: true });
    worker(a, { workflows: [wf] });
    await entered.wait();
    await b.cancel("wcr", "r1");
    expect(gate.opened).toBe(false);
    gate.open();
    await until(async () => (await statusOf(t.db, "wcr", "r1")) === "completed", "the run ended");
    expect((await ending("wcr", "r1")).run).toBe("completed/canceled");
    expect((await a.inspect("wcr", "r1"))?.response).toMatchObject({ status: 409, outcome: "canceled" });
  }, 60_000);

  // The wait's schema, run on the stored signal when the run is taken again: an async refinement (a lookup,
  // say) ran under the lock. Armed after the delivery, whose own check of the payload it lets through.
  it("a wait whose signal's async refinement is still running: cancel returns, the run ends canceled", async () => {
    const [a, b] = twoProcesses(t, 4);
    const { entered, gate, hold } = held("the refinement");
    let armed = false;
    const schema = z.object({ ok: z.boolean() }).refine(async () => {
      if (armed) {
        await hold();
      }
      return true;
    });
    const wf = workflow("wcs_wait")
      .waitFor("approval", { schema })
      .phase("after", () => ({ after: true }))
      .respond(({ state }) => ({ status: 200, body: state }));
    expect((await a.runOnce(wf, { tenantId: "wcs", key: "r1", input: {} })).status).toBe(202);
    await a.signal("wcs", "r1", "approval", { ok: true });
    armed = true;
    worker(a, { workflows: [wf] });
    await entered.wait();
    await b.cancel("wcs", "r1");
    expect(gate.opened).toBe(false);
    gate.open();
    await until(async () => (await statusOf(t.db, "wcs", "r1")) === "completed", "the run ended");
    expect(await ending("wcs", "r1")).toEqual({ run: "completed/canceled", wait: ["started"] });
    expect((await a.inspect("wcs", "r1"))?.response).toMatchObject({ status: 409, outcome: "canceled" });
  }, 60_000);
});
