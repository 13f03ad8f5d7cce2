/**
 * Fault: a signal that arrived after a wait had timed out (while its
 * `onTimeout` ran, or after the run went on) was acknowledged as new
 * (`duplicate: false`) and stored, but nothing ever read it: the run
 * finished on the timeout's value. A provider's "confirmed" webhook got a
 * 200 while the order was voided. Now the timeout is recorded with its
 * decision, and a later signal is refused with `RunStateError`; a signal
 * that beats the decision is still the one the run reads.
 */

import { sql } from "kysely";
import { expect, it } from "vitest";
import { createEngine, RunStateError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const T = "acme";

async function makeDue(key: string): Promise<void> {
  await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
}

function gated() {
  let open!: () => void;
  let entered!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const inside = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const wf = workflow("late_signal")
    .waitFor("confirmed", {
      timeoutMs: 60_000,
      onTimeout: async () => {
        entered();
        await gate;
        return { timedOut: true };
      },
    })
    .phase("settle", ({ state }) => ({ settled: state.confirmed }))
    .respond(({ state }) => ({ status: 200, body: state }));
  return { wf, open, inside };
}

it("a signal sent while onTimeout runs is refused with RunStateError, and again after the run completed", async () => {
  const engine = createEngine({ db: t.db });
  const { wf, open, inside } = gated();
  expect((await engine.runOnce(wf, { tenantId: T, key: "k1", input: {} })).status).toBe(202);
  await makeDue("k1");

  const resumed = engine.runOnce(wf, { tenantId: T, key: "k1", input: {} });
  await inside;
  const late = await engine.signal(T, "k1", "confirmed", { ok: true }).catch((e: unknown) => e);
  expect(late).toBeInstanceOf(RunStateError);
  expect((late as Error).message).toMatch(/timed out waiting for signal 'confirmed'/);
  open();

  const done = await resumed;
  expect(done.status).toBe(200);
  expect(done.body).toEqual({ confirmed: { timedOut: true }, settled: { timedOut: true } });
  // Once completed, the same late signal is still refused, never taken for a duplicate of something delivered.
  await expect(engine.signal(T, "k1", "confirmed", { ok: true })).rejects.toBeInstanceOf(RunStateError);
});

it("a signal that arrives before the timeout is decided is the one the run reads", async () => {
  const engine = createEngine({ db: t.db });
  const { wf, open } = gated();
  expect((await engine.runOnce(wf, { tenantId: T, key: "k2", input: {} })).status).toBe(202);
  await makeDue("k2");
  // Due by its deadline, but the signal comes first: it wins over the timeout.
  expect((await engine.signal(T, "k2", "confirmed", { ok: true })).duplicate).toBe(false);
  open();
  const done = await engine.runOnce(wf, { tenantId: T, key: "k2", input: {} });
  expect(done.body).toEqual({ confirmed: { ok: true }, settled: { ok: true } });
  expect(await engine.signal(T, "k2", "confirmed", { ok: true })).toEqual({ duplicate: true, woke: false });
});
