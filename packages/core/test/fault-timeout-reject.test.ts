/**
 * Fault: `ctx.reject` called from a `.waitFor`'s `onTimeout`, when the wait
 * is the workflow's first item, deleted the run. The run had suspended on
 * the wait (a committed 202 the caller was given, or an enqueued run that
 * committed with the caller's transaction), so there was no claim left to
 * refuse: the intent vanished and a retry started over. Now it is a usage
 * error and the run stays where it was.
 */

import { sql } from "kysely";
import { expect, it } from "vitest";
import { createEngine, WorkflowUsageError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

it("reject in onTimeout of a first-item wait is a usage error and keeps the run", async () => {
  const engine = createEngine({ db: t.db });
  const wf = workflow("timeout_reject")
    .waitFor("approved", {
      timeoutMs: 60_000,
      // Not in TimeoutContext's type: called as untyped JavaScript would call it.
      onTimeout: (ctx) =>
        (ctx as unknown as { reject(status: number, body: unknown): never }).reject(400, { code: "too_late" }),
    })
    .respond(({ state }) => ({ status: 200, body: state }));

  expect((await engine.runOnce(wf, { tenantId: T, key: "k1", input: {} })).status).toBe(202);
  await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() - interval '1 second'
            WHERE tenant_id = ${T} AND key = 'k1'`.execute(t.db);

  const err = await engine.runOnce(wf, { tenantId: T, key: "k1", input: {} }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowUsageError);
  expect((err as Error).message).toMatch(/onTimeout of waitFor 'approved'.*ctx\.fail/);
  const rec = await engine.inspect(T, "k1");
  expect(rec).not.toBeNull();
  expect(rec?.status).toBe("in_flight");
});
