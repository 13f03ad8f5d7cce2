/**
 * Fault kind "no heartbeat": while a run's code runs, the engine renews the
 * run's lease (the heartbeat), so a step slower than the lease never looks
 * abandoned. Without renewals the lease lapses in the middle of the step and
 * the next retry takes a live run over, calling the step a second time.
 *
 * The wait is bounded by the database clock, not by a test timeout: the run
 * holds in its step until its lease, as read at that moment, has either
 * been moved by a renewal or run out.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { deferred } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase();
const T = "hb";
// Seconds, with a renewal every 200 ms: a loaded machine still renews many times before it runs out.
const LEASE_MS = 5_000;

/** The run's lease as the database has it now (text, compared on the database clock). */
async function lockedUntil(key: string): Promise<string> {
  const { rows } = await sql<{ until: string | null }>`
    SELECT locked_until::text AS until FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}
  `.execute(t.db);
  const until = rows[0]?.until;
  if (!until) throw new Error(`no lease on ${T}/${key}`);
  return until;
}

describe("the heartbeat keeps a slow run's lease", () => {
  it("a step that outlasts its lease has the lease moved on before it runs out; a retry meanwhile gets 409", async () => {
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS, heartbeatMs: 200 });
    const reached = deferred();
    const release = deferred();
    let calls = 0;
    const slow = workflow("fault_no_heartbeat")
      .step("export", async () => {
        calls++;
        reached.resolve();
        await release.promise;
        return { done: true };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const running = engine.runOnce(slow, { tenantId: T, key: "slow", input: {} });
    await reached.promise;
    const first = await lockedUntil("slow");
    // Until a renewal moves the lease past `first`, or the database clock passes it.
    const seen = await waitFor(async () => {
      const { rows } = await sql<{ renewed: boolean; lapsed: boolean }>`
        SELECT locked_until > ${first}::timestamptz AS renewed, clock_timestamp() > ${first}::timestamptz AS lapsed
        FROM idempo.runs WHERE tenant_id = ${T} AND key = ${"slow"}
      `.execute(t.db);
      const row = rows[0];
      return row && (row.renewed || row.lapsed) ? row : undefined;
    }, 60_000);
    expect(seen.renewed).toBe(true);
    await expect(engine.runOnce(slow, { tenantId: T, key: "slow", input: {} })).rejects.toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
    release.resolve();
    expect(await running).toMatchObject({ status: 200, replayed: false, body: { done: true } });
    expect(calls).toBe(1);
    expect((await engine.inspect(T, "slow"))?.attempt).toBe(1);
  });
});
