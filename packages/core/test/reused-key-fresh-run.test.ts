/**
 * A key reused after retention (no tombstone) starts a new run on the old
 * record's row. Whatever the old run left in that row must not reach the
 * new one: a run cancelled while it waited keeps its wait's deadline, and a
 * wait keeps an existing deadline at the same item (as after a takeover), so
 * the new run's wait must not find the old run's and time out at once. Both
 * the claim's and the enqueue's reuse are checked. Times are moved in the
 * database instead of waited for.
 */
import { sql } from "kysely";
import { expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";
const HOUR = 3_600_000;

function confirmation(name: string) {
  return workflow(name, { tombstoneMs: 0 })
    .phase("prepare", () => ({ prepared: true }))
    .waitFor("confirmed", { timeoutMs: HOUR })
    .respond(({ state }) => ({ status: 201, body: state }));
}

/** The old run: suspended at its wait, cancelled, its deadline and its retention long past. */
async function oldRunCancelledAtItsWait(
  engine: ReturnType<typeof createEngine>,
  wf: ReturnType<typeof confirmation>,
  key: string,
) {
  expect((await engine.runOnce(wf, { tenantId: T, key, input: {} })).status).toBe(202);
  await engine.cancel(T, key);
  await sql`UPDATE idempo.runs
            SET wait_until = CASE WHEN wait_until IS NULL THEN NULL ELSE clock_timestamp() - interval '1 day' END,
                wake_at = CASE WHEN wake_at IS NULL THEN NULL ELSE clock_timestamp() - interval '1 day' END,
                expires_at = clock_timestamp() - interval '1 hour'
            WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
}

async function dbNow(): Promise<number> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return (rows[0] as { now: Date }).now.getTime();
}

it("a key claimed again after retention waits with its own deadline, not the cancelled run's", async () => {
  const engine = createEngine({ db: t.db });
  const wf = confirmation("reuse_claim");
  await oldRunCancelledAtItsWait(engine, wf, "k1");

  const before = await dbNow();
  const again = await engine.runOnce(wf, { tenantId: T, key: "k1", input: {} });
  expect(again).toMatchObject({ status: 202, outcome: "suspended" });
  const rec = await engine.inspect(T, "k1");
  expect(rec?.status).toBe("suspended");
  expect(rec?.wakeAt?.getTime()).toBeGreaterThanOrEqual(before + HOUR - 1000);
  expect(await engine.signal(T, "k1", "confirmed", "ok")).toEqual({ duplicate: false, woke: true });
});

it("a key enqueued again after retention waits with its own deadline, not the cancelled run's", async () => {
  const wf = confirmation("reuse_enqueue");
  const engine = createEngine({ db: t.db, workflows: [wf] });
  await oldRunCancelledAtItsWait(engine, wf, "k2");

  const before = await dbNow();
  expect(await engine.enqueue(t.db, wf, { tenantId: T, key: "k2", input: {} })).toEqual({ created: true });
  const worker = engine.startWorker({ workflows: [wf], sweep: false, intervalMs: 50 });
  const rec = await waitFor(async () => {
    const r = await engine.inspect(T, "k2");
    return r?.status === "suspended" && r.waitingFor ? r : undefined;
  }, 30_000).finally(() => worker.stop());
  expect(rec?.wakeAt?.getTime()).toBeGreaterThanOrEqual(before + HOUR - 1000);
});
