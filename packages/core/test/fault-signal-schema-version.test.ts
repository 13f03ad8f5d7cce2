/**
 * Fault: `engine.signal` checked a payload against the schema of the newest
 * deployed version that has a wait of that name, not the schema of the
 * version the run started under. With v2 deployed (replacing v1) and v2's
 * wait expecting another payload shape, a signal that was right for a v1
 * run was refused (400, the provider retried until the wait timed out), and
 * one shaped for v2 was stored, then failed the run's own schema and parked
 * the run with a signal that can no longer be replaced.
 */
import { expect, it } from "vitest";
import { z } from "zod";
import { createEngine, InputValidationError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 4 });
const T = "acme";

const v1 = workflow("tds_versions")
  .waitFor("three_ds", { schema: z.object({ outcome: z.enum(["succeeded", "failed"]) }) })
  .respond(({ state }) => ({ status: 200, body: { v: 1, outcome: state.three_ds.outcome } }));
const v2 = workflow("tds_versions")
  .version(2)
  .replaces(v1)
  .waitFor("three_ds", { schema: z.object({ status: z.enum(["ok", "ko"]) }) })
  .respond(({ state }) => ({ status: 200, body: { v: 2, outcome: state.three_ds.status } }));

it("a signal for a run is checked against the schema of the run's own version", async () => {
  // Runs started before the deploy, by the old code.
  const before = createEngine({ db: t.db });
  expect((await before.runOnce(v1, { tenantId: T, key: "old-a", input: {} })).status).toBe(202);
  expect((await before.runOnce(v1, { tenantId: T, key: "old-b", input: {} })).status).toBe(202);

  // The webhook process after the deploy knows v2, which brings v1 along.
  const webhooks = createEngine({ db: t.db, workflows: [v2] });
  expect(await webhooks.signal(T, "old-a", "three_ds", { outcome: "succeeded" })).toEqual({
    duplicate: false,
    woke: true,
  });
  await expect(webhooks.signal(T, "old-b", "three_ds", { status: "ok" })).rejects.toBeInstanceOf(InputValidationError);

  // The v1 run finishes on v1 with its payload; a new run takes v2's schema.
  const done = await webhooks.runOnce(v2, { tenantId: T, key: "old-a", input: {} });
  expect(done).toMatchObject({ status: 200, body: { v: 1, outcome: "succeeded" } });
  expect((await webhooks.runOnce(v2, { tenantId: T, key: "new", input: {} })).status).toBe(202);
  await expect(webhooks.signal(T, "new", "three_ds", { outcome: "succeeded" })).rejects.toBeInstanceOf(
    InputValidationError,
  );
  expect(await webhooks.signal(T, "new", "three_ds", { status: "ok" })).toMatchObject({ duplicate: false });
});
