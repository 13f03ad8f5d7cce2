/**
 * The SQL interface's `cancel()` of a parent cancels its children that
 * have not completed, and theirs in turn, as `engine.cancel` does: the
 * same function (`cancel_children`, migration 0024), the same answer for
 * each child, and none of them runs afterwards. A refused cancel (the
 * parent already completed) leaves every child as it was, and a deadlock
 * on the children's rows runs the children's cancel again instead of
 * raising 40P01. Counted from the rows and from the calls a worker makes.
 */
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createEngine, deriveChildKey, workflow } from "../src/index.ts";
import { PARENT_ENDED } from "../src/store/child-cancel.ts";
import { useTestDatabase } from "./support/db.ts";
import { indexedInput, worker } from "./support/fanout.ts";
import { sleep } from "./support/faults.ts";
import { sqlError } from "./support/sql-api.ts";

const t = useTestDatabase({ name: "idempo_sql_cancel" });

async function childrenOf(tenantId: string, parent: string) {
  const { rows } = await sql<{ status: string; outcome: string | null; response_status: number | null; body: unknown }>`
    SELECT status, outcome, response_status, response_body AS body FROM idempo.runs
    WHERE tenant_id = ${tenantId} AND parent_key = ${parent} ORDER BY parent_item, child_index`.execute(t.db);
  return rows;
}

describe("cancel of a parent through the SQL interface", () => {
  // SPEC: "Canceling a parent cancels its children that have not completed"; sql-api.md lists
  // `cancel(tenant_id, key ...)` as the SQL form of `engine.cancel`. Before 0024 the SQL function completed
  // the parent only: its children went on, made due one by one, until a sweep found them orphaned.
  it("SQL cancel of a parent cancels its children too", async () => {
    const engine = createEngine({ db: t.db });
    const effects: number[] = [];
    const child = workflow("asq_child")
      .input(indexedInput)
      .step("s", async ({ input }) => {
        effects.push(input.i);
        await sleep(150);
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("asq_parent")
      .map("fan", child, () => [0, 1, 2, 3, 4].map((i) => ({ i })), { concurrency: 1 })
      .respond(() => ({ status: 200, body: "not reached" }));
    await engine.runOnce(parent, { tenantId: "asq", key: "p1", input: {} });
    await sql`SELECT status FROM idempo.cancel('asq', 'p1')`.execute(t.db);
    worker(engine, { workflows: [parent] });
    await sleep(1_500);
    const children = await childrenOf("asq", "p1");
    expect({ effects, children: children.map((r) => r.outcome) }).toEqual({
      effects: [],
      children: ["canceled", "canceled", "canceled", "canceled", "canceled"],
    });
    // The answer engine.cancel gives a child whose parent ended first.
    expect(children[0]).toMatchObject({ response_status: PARENT_ENDED.status, body: JSON.parse(PARENT_ENDED.body) });
    expect((await engine.inspect("asq", "p1"))?.status).toBe("completed");
  });

  it("reaches the children's own children, and leaves a completed child as it was", async () => {
    const engine = createEngine({ db: t.db });
    const leaf = workflow("asg_leaf")
      .input(indexedInput)
      .step("s", ({ input }) => ({ i: input.i }))
      .respond(({ state }) => ({ status: 200, body: state.i }));
    const middle = workflow("asg_middle")
      .map("leaves", leaf, () => [0, 1].map((i) => ({ i })))
      .respond(() => ({ status: 200, body: null }));
    const top = workflow("asg_top")
      .child("done", leaf, () => ({ i: 7 }))
      .child("mid", middle, () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(top, { tenantId: "asg", key: "t1", input: {} });
    const done = deriveChildKey("asg", "t1", "asg_top", "done", 0);
    expect((await engine.runOnce(leaf, { tenantId: "asg", key: done, input: { i: 7 } })).status).toBe(200);
    // The top run, due again, reaches its second item: the middle child, which fans out to two leaves.
    await engine.runOnce(top, { tenantId: "asg", key: "t1", input: {} });
    const mid = deriveChildKey("asg", "t1", "asg_top", "mid", 0);
    await engine.runOnce(middle, { tenantId: "asg", key: mid, input: {} });
    expect(await childrenOf("asg", mid)).toHaveLength(2);
    await sql`SELECT status FROM idempo.cancel('asg', 't1')`.execute(t.db);
    const outcomes = async (parent: string) => (await childrenOf("asg", parent)).map((r) => r.outcome);
    expect({ top: await outcomes("t1"), mid: await outcomes(mid) }).toEqual({
      top: ["succeeded", "canceled"],
      mid: ["canceled", "canceled"],
    });
  });

  it("a refused cancel (the parent already completed) cancels no child", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("asr_child")
      .input(indexedInput)
      .step("s", ({ input }) => ({ i: input.i }))
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("asr_parent")
      .map("fan", child, () => [0, 1].map((i) => ({ i })), { concurrency: 1 })
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(parent, { tenantId: "asr", key: "p1", input: {} });
    // The parent ends first (an engine cancel that does not reach the children: they are left as orphans).
    await sql`SELECT 1 FROM idempo.mark_completed('asr', 'p1', NULL, true, 'failed', 500, '{}'::json, NULL, NULL, false)`.execute(
      t.db,
    );
    const error = await sqlError(sql`SELECT * FROM idempo.cancel('asr', 'p1')`.execute(t.db));
    expect(error.sqlstate).toBe("IP008");
    expect((await childrenOf("asr", "p1")).map((r) => r.status)).toEqual(["suspended", "suspended"]);
  });

  // children-cancel-deadlock.test.ts makes the same cycle for engine.cancel: another transaction holds the
  // child with the greatest key, waits until the cancel is blocked on it, then locks the child with the
  // smallest key (held by the cancel) under a long deadlock_timeout, so the cancel's statement is rolled back.
  it("a deadlock on the children's rows runs their cancel again: every child and the parent end canceled", async () => {
    const engine = createEngine({ db: t.db });
    const child = workflow("asd_child")
      .step("s", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const parent = workflow("asd_parent")
      .map("fan", child, () => [{}, {}, {}])
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(parent, { tenantId: "asd", key: "p1", input: {} });
    const other = new pg.Client({ connectionString: t.url });
    await other.connect();
    try {
      const { rows: children } = await other.query<{ key: string }>(
        "SELECT key FROM idempo.runs WHERE tenant_id = 'asd' AND parent_key = 'p1' ORDER BY key",
      );
      expect(children).toHaveLength(3);
      await other.query("BEGIN");
      await other.query("SET LOCAL deadlock_timeout = '60s'");
      await other.query("SELECT 1 FROM idempo.runs WHERE tenant_id = 'asd' AND key = $1 FOR UPDATE", [
        children[2]?.key,
      ]);
      const canceled = sql<{ status: string }>`SELECT status FROM idempo.cancel('asd', 'p1')`.execute(t.db).then(
        ({ rows }) => ({ status: rows[0]?.status, error: undefined }),
        (error: unknown) => ({ status: undefined, error }),
      );
      let blocked = false;
      for (let i = 0; i < 600 && !blocked; i++) {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE '%idempo.cancel(%'`.execute(t.db);
        blocked = (rows[0]?.n ?? 0) > 0;
        if (!blocked) await sleep(25);
      }
      expect(blocked).toBe(true);
      await other.query("SELECT 1 FROM idempo.runs WHERE tenant_id = 'asd' AND key = $1 FOR UPDATE", [
        children[0]?.key,
      ]);
      await other.query("ROLLBACK");
      const result = await canceled;
      expect(result).toEqual({ status: "completed", error: undefined });
      expect((await childrenOf("asd", "p1")).map((r) => r.outcome)).toEqual(["canceled", "canceled", "canceled"]);
    } finally {
      await other.end();
    }
  }, 60_000);
});
