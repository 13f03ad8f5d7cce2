/**
 * A cancel of a parent meets a deadlock on its children's rows and still
 * cancels every child. `cancelChildren` locks the children in key order; a
 * child completing at that moment holds its own row and, in its completion
 * trigger, locks its parent's and a queued sibling's. The two orders can
 * meet in a cycle, which PostgreSQL breaks by rolling one statement back
 * with 40P01. Here the cycle is made on purpose, without timing: another
 * transaction holds the child with the greatest key, waits until the
 * cancel is blocked on it, then locks the child with the smallest key (held
 * by the cancel). The other transaction is given a long deadlock_timeout,
 * so the cancel's statement is the one PostgreSQL rolls back; the cancel
 * must run it again and return, never raise the raw deadlock.
 */
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { sleep } from "./support/faults.ts";

const t = useTestDatabase({ pool: 4 });

const transfer = workflow("ccd_transfer")
  .step("pay", () => ({ id: "tr" }))
  .respond(() => ({ status: 201, body: null }));
const payout = workflow("ccd_payout")
  .map("transfers", transfer, () => [{}, {}, {}])
  .respond(() => ({ status: 200, body: null }));

describe("cancel of a parent whose children's rows are in a lock cycle", () => {
  it("runs its statement again after the deadlock and cancels every child", async () => {
    const engine = createEngine({ db: t.db });
    await engine.runOnce(payout, { tenantId: "ccd", key: "p-1", input: {} });
    const other = new pg.Client({ connectionString: t.url });
    await other.connect();
    try {
      const { rows: children } = await other.query<{ key: string }>(
        "SELECT key FROM idempo.runs WHERE tenant_id = 'ccd' AND parent_key = 'p-1' ORDER BY key",
      );
      expect(children).toHaveLength(3);
      const first = children[0]?.key;
      const last = children[2]?.key;
      await other.query("BEGIN");
      // Only the cancel's backend checks for the cycle (after its own 1 s deadlock_timeout).
      await other.query("SET LOCAL deadlock_timeout = '60s'");
      await other.query("SELECT 1 FROM idempo.runs WHERE tenant_id = 'ccd' AND key = $1 FOR UPDATE", [last]);

      const canceled = engine.cancel("ccd", "p-1").then(
        (record) => ({ record, error: undefined }),
        (error: unknown) => ({ record: undefined, error }),
      );
      // The cancel's children statement is waiting for the row held above (bounded: 600 polls).
      let blocked = false;
      for (let i = 0; i < 600 && !blocked; i++) {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE '%idempo:cancel_children%'`.execute(t.db);
        blocked = (rows[0]?.n ?? 0) > 0;
        if (!blocked) await sleep(25);
      }
      expect(blocked).toBe(true);
      // Close the cycle: this waits for the child the cancel holds, until PostgreSQL rolls the cancel's statement back.
      await other.query("SELECT 1 FROM idempo.runs WHERE tenant_id = 'ccd' AND key = $1 FOR UPDATE", [first]);
      await other.query("ROLLBACK");

      const { record, error } = await canceled;
      expect(error).toBeUndefined();
      expect(record).toMatchObject({ status: "completed", response: { outcome: "canceled" } });
      const { rows: after } = await other.query<{ outcome: string }>(
        "SELECT outcome FROM idempo.runs WHERE tenant_id = 'ccd' AND parent_key = 'p-1'",
      );
      expect(after.map((r) => r.outcome)).toEqual(["canceled", "canceled", "canceled"]);
    } finally {
      await other.end();
    }
  }, 60_000);
});
