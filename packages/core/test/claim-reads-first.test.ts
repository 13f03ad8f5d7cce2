import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

// The claim reads the key before it tries the INSERT (migration 0009). These
// tests put a first request's uncommitted INSERT between another claim's
// read and its INSERT, on two real connections, and check both endings.
const t = useTestDatabase();
let pool: pg.Pool;

/** A pool that reports a backend terminated while idle (the test database is dropped with FORCE) instead of crashing. */
function quietPool(max: number): pg.Pool {
  const p = new pg.Pool({ connectionString: t.url, max });
  p.on("error", () => undefined).on("connect", (client) => client.on("error", () => undefined));
  return p;
}

beforeAll(() => {
  pool = quietPool(4);
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

  it("answers 'raced' when the record its INSERT collided with is gone by the second read, and the engine claims again", async () => {
    // Deletes the first request's record right after an INSERT that inserted nothing (its conflict): the
    // window between a claim's conflict and its second read, where a forget or a sweep can land.
    await pool.query(`
      CREATE FUNCTION idempo.gone_again() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM inserted) THEN
          DELETE FROM idempo.runs WHERE tenant_id = 'gone' AND owner_token = 'first';
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER gone_again AFTER INSERT ON idempo.runs REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION idempo.gone_again();`);
    try {
      const heldAs = async (key: string) => {
        const client = await pool.connect();
        await client.query("BEGIN");
        await client.query(CLAIM, ["gone", key, "run-first", "first"]);
        return client;
      };
      let first = await heldAs("k1");
      const raw = pool.query(CLAIM, ["gone", "k1", "run-second", "second"]);
      await untilWaiting();
      await first.query("COMMIT");
      first.release();
      expect((await raw).rows).toEqual([expect.objectContaining({ claimed: false, status: null, workflow: null })]);

      // The engine, on a plain pool (prepared calls), asks again and claims the key itself.
      const db = new Kysely<unknown>({
        dialect: new PostgresDialect({ pool: quietPool(2) }),
      });
      try {
        const engine = createEngine({ db });
        const wf = workflow("claim_first").respond(() => ({ status: 201, body: { mine: true } }));
        first = await heldAs("k2");
        const run = engine.runOnce(wf, { tenantId: "gone", key: "k2", input: {} });
        await untilWaiting();
        await first.query("COMMIT");
        first.release();
        expect(await run).toMatchObject({ status: 201, replayed: false });
        const { rows } = await pool.query("SELECT status FROM idempo.runs WHERE tenant_id = 'gone' AND key = 'k2'");
        expect(rows).toEqual([{ status: "completed" }]);
      } finally {
        await db.destroy();
      }
    } finally {
      await pool.query("DROP TRIGGER gone_again ON idempo.runs; DROP FUNCTION idempo.gone_again()");
    }
  });
});
