/**
 * A child workflow (of a `.child` or `.map` item, at any depth) whose step
 * names a `rateLimit` the engine lacks: the engine refuses the parent with
 * `WorkflowDefinitionError` when it is first given it, by `runOnce`,
 * `enqueue` or `startWorker` alike, before anything is written, since no
 * worker of this engine could ever run those children.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, WorkflowDefinitionError, workflow } from "../src/index.ts";

const t = useClonedDatabase("idempo_child_rate_limits", { pool: 4 });

async function statusOf(tenantId: string, key: string): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(t.db);
  return rows[0]?.status;
}

async function childCount(tenantId: string, parent: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = ${tenantId} AND parent_key = ${parent}`.execute(t.db);
  return rows[0]?.n ?? 0;
}

/** A parent mapping over a child whose step names `limit`. */
function family(prefix: string, limit: string) {
  const child = workflow(`${prefix}_child`)
    .step("s", () => ({}), { rateLimit: limit })
    .respond(() => ({ status: 200, body: null }));
  return workflow(`${prefix}_parent`)
    .map("fan", child, () => [{}, {}])
    .respond(() => ({ status: 200, body: null }));
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe("a child workflow with a rate limit the engine lacks", () => {
  it("startWorker refuses the parent", () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    expect(() =>
      engine.startWorker({ workflows: [family("arl_w", "no_such_limit")], sweep: false, schedules: false }),
    ).toThrow(WorkflowDefinitionError);
  });

  it("runOnce on the parent refuses it before anything is written", async () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    const parent = family("arl", "no_such_limit");
    const error = await failure(engine.runOnce(parent, { tenantId: "arl", key: "p1", input: {} }));
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect((error as Error).message).toMatch(
      /workflow 'arl_child', step 's': rateLimit 'no_such_limit' is not a rate limit of this engine/,
    );
    expect({ parent: await statusOf("arl", "p1"), children: await childCount("arl", "p1") }).toEqual({
      parent: undefined,
      children: 0,
    });
    // Refused again on the next call: a refused workflow is not remembered as known.
    await expect(engine.runOnce(parent, { tenantId: "arl", key: "p1", input: {} })).rejects.toBeInstanceOf(
      WorkflowDefinitionError,
    );
    expect(await statusOf("arl", "p1")).toBeUndefined();
  });

  it("enqueue of the parent refuses it before anything is written", async () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    const error = await failure(
      engine.enqueue(t.db, family("arle", "no_such_limit"), { tenantId: "arle", key: "p1", input: {} }),
    );
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(await statusOf("arle", "p1")).toBeUndefined();
  });

  it("a grandchild's unknown limit refuses the grandparent (the check follows children of children)", async () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    const grandparent = workflow("arlg_top")
      .child("middle", family("arlg", "no_such_limit"), () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await expect(engine.runOnce(grandparent, { tenantId: "arlg", key: "p1", input: {} })).rejects.toThrow(
      /workflow 'arlg_child', step 's': rateLimit 'no_such_limit'/,
    );
    await expect(engine.enqueue(t.db, grandparent, { tenantId: "arlg", key: "p2", input: {} })).rejects.toBeInstanceOf(
      WorkflowDefinitionError,
    );
    expect({ p1: await statusOf("arlg", "p1"), p2: await statusOf("arlg", "p2") }).toEqual({
      p1: undefined,
      p2: undefined,
    });
  });

  it("a child workflow whose limit the engine has: the parent is taken and its children written", async () => {
    const engine = createEngine({ db: t.db, rateLimits: { provider: { perSecond: 10 } } });
    const res = await engine.runOnce(family("arlk", "provider"), { tenantId: "arlk", key: "p1", input: {} });
    expect(res.outcome).toBe("suspended");
    expect(await childCount("arlk", "p1")).toBe(2);
    const worker = engine.startWorker({
      workflows: [family("arlk", "provider")],
      sweep: false,
      schedules: false,
      intervalMs: 50,
    });
    onTestFinished(() => worker.stop());
    await expect
      .poll(async () => statusOf("arlk", "p1"), { timeout: 30_000, interval: 25, message: "the parent completes" })
      .toBe("completed");
  });
});
