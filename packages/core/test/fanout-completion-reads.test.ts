/**
 * The completing branch of advance_run (a phase or step commit that is the
 * run's last) costs nothing for the slot fence of `.concurrency` when the
 * run has no limit: it reads the run's row once, in mark_completed's own
 * UPDATE, which asks slot_commit_allowed only of a run under a limit
 * (migration 0025). The fence itself still holds: a run under a limit
 * whose lease ended with no slot naming it is refused, nothing written.
 * Counted from PostgreSQL's per-transaction table statistics.
 */
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";

const t = useClonedDatabase("idempo_fanout_completion_reads", { pool: 4 });

/** A run in flight as owner "o", its lease `leaseMs` from now (negative: ended), under `limit` when given. */
async function inFlight(key: string, leaseMs: number, limit: string | null): Promise<void> {
  await sql`INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                                     input, status, owner_token, locked_until, retention_ms, concurrency_key)
            VALUES ('fcr', ${key}, ${`run-${key}`}, 'w', '[]', 'h', 'f', '{}', 'in_flight', 'o',
                    clock_timestamp() + ${leaseMs} * interval '1 millisecond', 1000, ${limit})`.execute(t.db);
}

/** advance_run completing `key` as owner "o" in one transaction, with the scans of idempo.runs it made. */
async function complete(key: string): Promise<{ advanced: boolean; scans: number; status: string }> {
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  try {
    await client.query("BEGIN");
    const { rows } = await client.query<{ advanced: boolean }>(
      `SELECT idempo.advance_run('fcr', $1, 'o', 'last', '{}'::json, 1000, 'succeeded', 200, 'null'::json) AS advanced`,
      [key],
    );
    const { rows: stats } = await client.query<{ scans: string }>(
      `SELECT (coalesce(idx_scan, 0) + coalesce(seq_scan, 0))::text AS scans FROM pg_stat_xact_user_tables
       WHERE schemaname = 'idempo' AND relname = 'runs'`,
    );
    await client.query("COMMIT");
    const { rows: after } = await client.query<{ status: string }>(
      "SELECT status FROM idempo.runs WHERE tenant_id = 'fcr' AND key = $1",
      [key],
    );
    return {
      advanced: rows[0]?.advanced ?? false,
      scans: Number(stats[0]?.scans ?? 0),
      status: after[0]?.status ?? "",
    };
  } finally {
    await client.end();
  }
}

describe("advance_run's completing branch", () => {
  // Before 0025 it read the row once more (an EXISTS asking slot_commit_allowed) on every completion,
  // although mark_completed asks it in its UPDATE since 0024.
  it("a run without a limit is completed with one read of its row", async () => {
    await inFlight("free", 60_000, null);
    expect(await complete("free")).toEqual({ advanced: true, scans: 1, status: "completed" });
  });

  // limits.md: a commit of a run under a limit is refused once no slot names it and its lease ended.
  it("a run under a limit with no slot and an ended lease is refused; nothing is written", async () => {
    await inFlight("held", -1_000, "w\u001ffcr");
    expect(await complete("held")).toMatchObject({ advanced: false, status: "in_flight" });
  });
});
