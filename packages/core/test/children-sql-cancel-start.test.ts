/**
 * The SQL interface's `cancel()` of a parent whose `.map` is starting its
 * children at that moment: the start holds the parent's row lock from its
 * first statement, the cancel's write of the parent waits for it, and the
 * children that start commits are canceled in the cancel's transaction
 * too (migration 0025), none left due for a worker. Real connections: the
 * engine's start on its pool, paused on a latch after it wrote the
 * children, and the cancel on a client of its own, seen waiting on a lock.
 */
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { echoChild, hooked, runnableChildren, until } from "./support/fanout.ts";
import { latch } from "./support/latch.ts";

const t = useClonedDatabase("idempo_children_sql_cancel_start", { pool: 6 });

describe("SQL cancel() racing a child start", () => {
  // SPEC: "Canceling a parent cancels its children that have not completed". Before 0025 cancel() canceled
  // the children it read, then the parent: the children of a start that committed in between stayed due.
  it("children a start commits while cancel() waits for the parent's row end canceled with it", async () => {
    const engine = createEngine({ db: t.db });
    const started = latch("the children are written", 30_000);
    const gate = latch("the start may commit", 60_000);
    hooked(engine, async (point) => {
      if (point !== "started:map:fan") return;
      started.open();
      await gate.wait();
    });
    const parent = workflow("scs_parent")
      .map("fan", echoChild("scs_child"), () => [0, 1, 2].map((i) => ({ i })))
      .respond(() => ({ status: 200, body: "not reached" }));
    const run = engine.runOnce(parent, { tenantId: "scs", key: "p1", input: {} });
    await started.wait();
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const pid = rows[0]?.pid;
      const canceled = client.query<{ status: string }>("SELECT status FROM idempo.cancel('scs', 'p1')");
      await until(async () => {
        const { rows: waiting } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid} AND wait_event_type = 'Lock'`.execute(
          t.db,
        );
        return waiting[0]?.n === 1;
      }, "cancel() waits for the parent's row");
      gate.open();
      expect((await run).status).toBe(202);
      expect((await canceled).rows[0]?.status).toBe("completed");
    } finally {
      await client.end();
    }
    const { rows } = await sql<{ ending: string }>`
      SELECT status || '/' || coalesce(outcome, '-') AS ending FROM idempo.runs WHERE tenant_id = 'scs'
      ORDER BY key = 'p1' DESC, key`.execute(t.db);
    expect(rows.map((r) => r.ending)).toEqual([
      "completed/canceled",
      "completed/canceled",
      "completed/canceled",
      "completed/canceled",
    ]);
    expect(await runnableChildren(t.db, "scs", "p1")).toBe(0);
  }, 60_000);
});
