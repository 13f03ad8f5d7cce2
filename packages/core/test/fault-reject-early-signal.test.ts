/**
 * Fault: `ctx.reject` deleted the run's row and history but not a signal
 * that had arrived early for it. The row stayed in `signals` for good: no
 * later run of the key can read it (signals belong to one run), and neither
 * the sweeper nor `forget` of a later run looks at it.
 */
import { sql } from "kysely";
import { expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

it("a reject deletes the signals that arrived early for the run, with its row and history", async () => {
  const engine = createEngine({ db: t.db });
  let reached!: () => void;
  const inStep = new Promise<void>((r) => {
    reached = r;
  });
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const wf = workflow("reject_early")
    .step("validate", async ({ reject }) => {
      reached();
      await gate;
      return reject(400, { code: "bad_card" });
    })
    .waitFor("confirmed")
    .respond(() => ({ status: 200, body: null }));

  const run = engine.runOnce(wf, { tenantId: T, key: "k1", input: {} });
  await inStep;
  // The provider's event races ahead while the run is still validating.
  expect(await engine.signal(T, "k1", "confirmed", { ok: true })).toEqual({ duplicate: false, woke: false });
  release();
  expect(await run).toMatchObject({ status: 400, outcome: "rejected" });
  const { rows } = await sql<{ runs: number; signals: number }>`
    SELECT (SELECT count(*)::int FROM idempo.runs WHERE tenant_id = ${T} AND key = 'k1') AS runs,
           (SELECT count(*)::int FROM idempo.signals WHERE tenant_id = ${T} AND key = 'k1') AS signals`.execute(t.db);
  expect(rows[0]).toEqual({ runs: 0, signals: 0 });
});
