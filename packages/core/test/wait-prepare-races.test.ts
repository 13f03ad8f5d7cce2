/**
 * A `.waitFor` item runs its callbacks on a read of the wait made before it
 * locks the run's row; a signal delivered in between (from another engine,
 * on its own pool) is never missed: the wait's transaction finds it and
 * the item goes round once more, on the signal now stored. The deliveries
 * are made from inside `accepted`, between the read and the lock.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import type { Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { requestFingerprint } from "../src/json/fingerprint.ts";
import { statusOf, until, worker } from "./support/fanout.ts";

const t = useClonedDatabase("idempo_wait_prepare_races", { pool: 8 });

/** The engine that runs the workflow, and another process that knows it too (it checks the signals it delivers). */
function twoEngines(wf: NonNullable<Parameters<typeof createEngine>[0]["workflows"]>): { a: Engine; b: Engine } {
  return { a: createEngine({ db: t.db }), b: createEngine({ db: t.connect(4), workflows: wf }) };
}

/** The outcomes of the run's wait history entries, in order. */
async function waitHistory(tenantId: string, key: string): Promise<string[]> {
  const { rows } = await sql<{ outcome: string }>`
    SELECT outcome FROM idempo.run_history WHERE tenant_id = ${tenantId} AND key = ${key} AND kind = 'wait'
    ORDER BY started_at`.execute(t.db);
  return rows.map((r) => r.outcome);
}

describe("a signal delivered between the wait's read and its lock", () => {
  it("no signal when read, one when locked: the run does not suspend, it moves past the wait with it", async () => {
    let accepted = 0;
    let b: Engine | undefined;
    const wf = workflow("wpr_arrive")
      .waitFor("approval")
      .accepted(async () => {
        accepted++;
        if (accepted === 1) await b?.signal("wpr", "r1", "approval", { v: 1 });
        return { queued: true };
      })
      .respond(({ state }) => ({ status: 200, body: state.approval }));
    const { a, b: other } = twoEngines([wf]);
    b = other;
    const result = await a.runOnce(wf, { tenantId: "wpr", key: "r1", input: {} });
    expect(result).toMatchObject({ status: 200, body: { v: 1 }, outcome: "succeeded" });
    expect(accepted).toBe(1);
    expect(await waitHistory("wpr", "r1")).toEqual(["succeeded"]);
  }, 60_000);

  it("an unusable stored signal, replaced by a delivery while the wait prepares its discard: the new one is used", async () => {
    let accepted = 0;
    let b: Engine | undefined;
    const wf = workflow("wpr_replace")
      .waitFor("approval", { schema: z.object({ v: z.number() }) })
      .accepted(async () => {
        accepted++;
        if (accepted === 2) await b?.signal("wpr", "r2", "approval", { v: 2 });
        return { queued: true };
      })
      .respond(({ state }) => ({ status: 200, body: state.approval }));
    const { a, b: other } = twoEngines([wf]);
    b = other;
    expect((await a.runOnce(wf, { tenantId: "wpr", key: "r2", input: {} })).status).toBe(202);
    // Stored unchecked (as SQL may), failing the schema, and the run made due by it.
    const bad = { v: "not a number" };
    await sql`
      INSERT INTO idempo.signals (tenant_id, key, run_id, name, payload, fingerprint)
      SELECT tenant_id, key, run_id, 'approval', ${JSON.stringify(bad)}::json,
             ${requestFingerprint("signal:approval", bad as never)}
      FROM idempo.runs WHERE tenant_id = 'wpr' AND key = 'r2'`.execute(t.db);
    await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() WHERE tenant_id = 'wpr' AND key = 'r2'`.execute(t.db);
    worker(a, { workflows: [wf] });
    await until(async () => (await statusOf(t.db, "wpr", "r2")) === "completed", "the run ended");
    const record = await a.inspect("wpr", "r2");
    expect(record?.response).toMatchObject({ status: 200, body: { v: 2 } });
    // With no takeover (attempts count takeovers): the wait went round once more, it did not give the run up.
    expect(record?.attempt).toBe(1);
    // The delivery discarded the unusable one (the wait found it gone and wrote nothing), then the wait used { v: 2 }.
    expect(await waitHistory("wpr", "r2")).toEqual(["succeeded", "discarded"]);
  }, 60_000);
});
