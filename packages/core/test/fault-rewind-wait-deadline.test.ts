/**
 * Fault: `retryFrom` on a run suspended at a `.waitFor` kept the wait's
 * committed deadline. An operator who rewinds a run to an item before the
 * wait, after that deadline passed, wants the items (the wait included) to
 * run again; instead the rewound run reached the wait, found the old
 * deadline passed and stored the 408 `wait_timeout` at once, without ever
 * waiting again.
 */
import { sql } from "kysely";
import { expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

it("a wait that runs again after retryFrom gets a fresh deadline, not the one that passed", async () => {
  const engine = createEngine({ db: t.db });
  const calls = { authorise: 0 };
  const wf = workflow("rewind_wait")
    .step("authorise", () => {
      calls.authorise++;
      return { auth: "a1" };
    })
    .waitFor("confirmed", { timeoutMs: 60_000 })
    .respond(({ state }) => ({ status: 201, body: state }));

  expect((await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} })).status).toBe(202);
  // The deadline passed while nobody resumed the run.
  await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${T} AND key = 'r1'`.execute(t.db);

  const rewound = await engine.retryFrom(T, "r1", "authorise");
  expect(rewound.status).toBe("in_flight");

  // The retry runs authorise again and then suspends on the wait again: 202, not a stored 408.
  const again = await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} });
  expect(again.status).toBe(202);
  expect(again.outcome).toBe("suspended");
  expect(calls.authorise).toBe(2);
  const rec = await engine.inspect(T, "r1");
  expect(rec?.status).toBe("suspended");
  expect(rec?.waitingFor?.kind).toBe("signal");
  const { rows } = await sql<{ future: boolean }>`
    SELECT wake_at > clock_timestamp() + interval '30 seconds' AS future FROM idempo.runs
    WHERE tenant_id = ${T} AND key = 'r1'`.execute(t.db);
  expect(rows[0]?.future).toBe(true);

  // And the signal still finishes it.
  expect(await engine.signal(T, "r1", "confirmed", { ok: true })).toEqual({ duplicate: false, woke: true });
  const done = await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} });
  expect(done).toMatchObject({ status: 201, body: { auth: "a1", confirmed: { ok: true } } });
});
