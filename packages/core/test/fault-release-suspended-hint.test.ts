/**
 * Fault: `release` of a suspended run answered "unpark or retryFrom makes
 * it takeable", but `unpark` of a suspended run is itself refused ("is
 * suspended, not parked"). The hint sent operators in a circle.
 */
import { expect, it } from "vitest";
import { createEngine, RunStateError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 2 });

it("release of a suspended run says what takes it, without pointing at unpark", async () => {
  const engine = createEngine({ db: t.db });
  const wf = workflow("release_hint")
    .waitFor("go")
    .respond(() => ({ status: 200, body: null }));
  expect((await engine.runOnce(wf, { tenantId: "acme", key: "k1", input: {} })).status).toBe(202);
  const err = await engine.release("acme", "k1").catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RunStateError);
  expect((err as Error).message).toMatch(/is suspended/);
  expect((err as Error).message).not.toMatch(/unpark/);
  await expect(engine.unpark("acme", "k1")).rejects.toBeInstanceOf(RunStateError);
});
