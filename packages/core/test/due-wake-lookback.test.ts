/**
 * A worker that only polls sleeps until the next known wake-up time. That
 * time is read after the round's due scan, so a run whose wake-up time falls
 * between the scan and the read is in neither: it was not due for the scan
 * and is no longer in the future for the read. The read looks back over the
 * gap, so such a run answers "look again now" instead of a whole interval.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { msUntilNextWake } from "../src/store/due-runs.ts";
import { tablesIn } from "../src/store/run-store.ts";
import { useTestDatabase } from "./support/db.ts";
import { executorOf } from "./support/executor.ts";

const t = useTestDatabase();
const tables = tablesIn("idempo");

async function wakeAtPassed(key: string): Promise<void> {
  await expect
    .poll(
      async () => {
        const { rows } = await sql<{ past: boolean }>`
          SELECT wake_at < now() - interval '20 milliseconds' AS past FROM idempo.runs WHERE key = ${key}`.execute(
          t.db,
        );
        return rows[0]?.past;
      },
      { timeout: 60_000, interval: 10 },
    )
    .toBe(true);
}

describe("the next wake-up time after a due scan", () => {
  it("counts a run that fell due since the scan, as 1 ms, and one that fell due before it not at all", async () => {
    const wf = workflow("lookback")
      .sleep("nap", 30)
      .respond(() => ({ status: 200, body: null }));
    const engine = createEngine({ db: t.db });
    expect((await engine.runOnce(wf, { tenantId: "t", key: "lb", input: {} })).status).toBe(202);
    await wakeAtPassed("lb");

    // No look-back: the run is past its wake-up time, so it is not "next".
    expect(await msUntilNextWake(executorOf(t.db), tables, ["lookback"], 0)).toBeNull();
    // The scan ran a minute ago: the run fell due since, so look again now.
    expect(await msUntilNextWake(executorOf(t.db), tables, ["lookback"], 60_000)).toBe(1);
    // Another workflow's run is never counted.
    expect(await msUntilNextWake(executorOf(t.db), tables, ["other"], 60_000)).toBeNull();
  });

  it("gives the time left for a run not yet due", async () => {
    const wf = workflow("later")
      .sleep("nap", 3_600_000)
      .respond(() => ({ status: 200, body: null }));
    const engine = createEngine({ db: t.db });
    expect((await engine.runOnce(wf, { tenantId: "t", key: "la", input: {} })).status).toBe(202);
    const ms = await msUntilNextWake(executorOf(t.db), tables, ["later"], 5);
    // Not "look again now" (1 ms), and never more than the sleep itself.
    expect(ms).toBeGreaterThan(1);
    expect(ms).toBeLessThanOrEqual(3_600_000);
  });
});
