import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestDatabase } from "./support/db.ts";

// The claim reads the key before it tries the INSERT (migration 0009). These
// tests put a first request's uncommitted INSERT between another claim's
// read and its INSERT, on two real connections, and check both endings.
const t = useTestDatabase();
let pool: pg.Pool;
beforeAll(() => {
  pool = new pg.Pool({ connectionString: t.url, max: 4 });
});
afterAll(() => pool.end());

const CLAIM = `SELECT * FROM idempo.claim_new_key($1, $2, $3, 'claim_first', 1, '[]', 'h', 'f', '{}', NULL, $4, 30000, 86400000)`;

/** The claim as the engine sends it, on its own connection; resolves when the statement returns. */
async function claim(key: string, owner: string): Promise<{ claimed: boolean; status: string | null }> {
  const { rows } = await pool.query(CLAIM, ["rf", key, `run-${owner}`, owner]);
  expect(rows).toHaveLength(1);
  return rows[0];
}

/** A first request's INSERT, held open in a transaction: `end` commits or rolls it back. */
async function heldInsert(key: string): Promise<{ end(how: "COMMIT" | "ROLLBACK"): Promise<void> }> {
  const client = await pool.connect();
  await client.query("BEGIN");
  expect((await client.query(CLAIM, ["rf", key, "run-first", "first"])).rows[0].claimed).toBe(true);
  return {
    async end(how) {
      await client.query(how);
      client.release();
    },
  };
}

/** Has the claim's backend started waiting on a lock (the held INSERT's transaction)? */
async function waitingOnLock(): Promise<boolean> {
  const { rows } = await pool.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%claim_new_key%'",
  );
  return rows[0].n > 0;
}

async function untilWaiting(): Promise<void> {
  for (let i = 0; i < 500 && !(await waitingOnLock()); i++) await new Promise((r) => setTimeout(r, 10));
  expect(await waitingOnLock()).toBe(true);
}

describe("a claim that reads before it inserts", () => {
  it("answers with the record a racing first request committed while its INSERT waited", async () => {
    const first = await heldInsert("raced-commit");
    // Its read sees nothing (uncommitted); its INSERT waits on the first request's transaction.
    const second = claim("raced-commit", "second");
    await untilWaiting();
    await first.end("COMMIT");
    expect(await second).toMatchObject({ claimed: false, status: "in_flight" });
    const { rows } = await pool.query("SELECT owner_token FROM idempo.runs WHERE tenant_id = 'rf' AND key = $1", [
      "raced-commit",
    ]);
    expect(rows).toEqual([{ owner_token: "first" }]);
  });

  it("claims the key itself when the racing first request rolled back", async () => {
    const first = await heldInsert("raced-rollback");
    const second = claim("raced-rollback", "second");
    await untilWaiting();
    await first.end("ROLLBACK");
    expect(await second).toMatchObject({ claimed: true });
    const { rows } = await pool.query("SELECT owner_token FROM idempo.runs WHERE tenant_id = 'rf' AND key = $1", [
      "raced-rollback",
    ]);
    expect(rows).toEqual([{ owner_token: "second" }]);
  });
});
