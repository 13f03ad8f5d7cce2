/**
 * Fault of the kind "a successor waits behind a zombie's open transaction":
 * a takeover kept the run id, so the outbox delivery key the zombie's
 * paused phase had inserted (uncommitted) made the successor's insert wait
 * on the unique index for as long as the zombie kept its transaction. Each
 * place a successor can meet a zombie's locks is tested with a zombie
 * paused inside a phase: idempo's own rows must never block a takeover,
 * and a wait on the user's rows is bounded (`lockTimeoutMs`) and typed.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { PhaseContext } from "../src/index.ts";
import { createEngine, LeaseLostError, PhaseConflictError, workflow } from "../src/index.ts";
import { deferred, rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 8 });

beforeAll(async () => {
  await sql`CREATE TABLE zl_items (tenant_id text, sku text, attempt int, UNIQUE (tenant_id, sku))`.execute(t.db);
});

/** A workflow whose phase `work` runs `body`, and whose first attempt pauses inside it (transaction open). */
function pausingWorkflow(
  name: string,
  body: (ctx: PhaseContext<unknown, unknown, unknown>) => Promise<void>,
  options: { lockTimeoutMs?: number } = {},
) {
  const gate = deferred();
  const reached = deferred();
  const wf = workflow(name, options)
    .phase("work", async (ctx) => {
      const { attempt } = ctx;
      await body(ctx as PhaseContext<unknown, unknown, unknown>);
      if (attempt === 1) {
        reached.resolve();
        await gate.promise;
      }
      return { by: attempt };
    })
    .respond(({ state }) => ({ status: 201, body: state }));
  return { wf, reached: reached.promise, resume: () => gate.resolve() };
}

describe("a takeover never waits on a paused zombie's idempo rows", () => {
  it("outbox enqueue: the successor finishes while the zombie is still paused with its message uncommitted", async () => {
    const engine = createEngine({ db: t.db });
    const z = pausingWorkflow("zl_outbox", async ({ outbox }) => {
      await outbox.enqueue("receipt.email", { n: 1 });
    });
    const zombie = rejectionOf(engine.runOnce(z.wf, { tenantId: "t1", key: "zl-1", input: {} }));
    await z.reached;
    await engine.release("t1", "zl-1");
    // Before the fix this call waited on Lock/transactionid until the zombie's transaction ended.
    const successor = await engine.runOnce(z.wf, { tenantId: "t1", key: "zl-1", input: {} });
    expect(successor).toMatchObject({ status: 201, body: { by: 2 } });
    z.resume();
    expect(await zombie).toBeInstanceOf(LeaseLostError);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.outbox WHERE tenant_id = 't1' AND key = 'zl-1'`.execute(t.db);
    expect(rows[0]?.n).toBe(1);
  });

  it("history, run row and renewal: cancel, release, inspect and a takeover all answer while the zombie is paused", async () => {
    const engine = createEngine({ db: t.db });
    const z = pausingWorkflow("zl_plain", async ({ tx }) => {
      await sql`SELECT 1`.execute(tx);
    });
    const zombie = rejectionOf(engine.runOnce(z.wf, { tenantId: "t1", key: "zl-2", input: {} }));
    await z.reached;
    expect((await engine.inspect("t1", "zl-2"))?.status).toBe("in_flight");
    await engine.release("t1", "zl-2");
    expect((await engine.runOnce(z.wf, { tenantId: "t1", key: "zl-2", input: {} })).status).toBe(201);
    z.resume();
    expect(await zombie).toBeInstanceOf(LeaseLostError);
  });
});

describe("a wait on the user's rows is bounded", () => {
  it("the successor needs a row the paused zombie inserted: PhaseConflictError naming the phase, not a hang; after the zombie ends, a retry finishes", async () => {
    const engine = createEngine({ db: t.db });
    const z = pausingWorkflow(
      "zl_user_row",
      async ({ tx, attempt }) => {
        await sql`INSERT INTO zl_items VALUES ('t1', 'sku-1', ${attempt})`.execute(tx);
      },
      { lockTimeoutMs: 100 },
    );
    const zombie = rejectionOf(engine.runOnce(z.wf, { tenantId: "t1", key: "zl-3", input: {} }));
    await z.reached;
    await engine.release("t1", "zl-3");
    const waited = await rejectionOf(engine.runOnce(z.wf, { tenantId: "t1", key: "zl-3", input: {} }));
    expect(waited).toBeInstanceOf(PhaseConflictError);
    expect(waited.message).toMatch(/phase 'work' hit transient database conflicts \d+ times .*SQLSTATE 55P03/);
    expect((await engine.inspect("t1", "zl-3"))?.status).toBe("in_flight");
    z.resume();
    expect(await zombie).toBeInstanceOf(LeaseLostError);
    await engine.release("t1", "zl-3");
    expect(await engine.runOnce(z.wf, { tenantId: "t1", key: "zl-3", input: {} })).toMatchObject({
      status: 201,
      body: { by: 3 },
    });
    const { rows } = await sql<{ attempt: number }>`SELECT attempt FROM zl_items WHERE sku = 'sku-1'`.execute(t.db);
    expect(rows).toEqual([{ attempt: 3 }]);
  });
});
