/**
 * Fault kind "non-atomic claim": a claim that reads the key, finds nothing
 * and then writes its row whatever another first request committed in
 * between, so two first requests both win the key. The race is put in
 * place on two real connections, not left to chance: a first request's
 * claim is held open in a transaction while the engine's claim reads (it
 * sees nothing) and its INSERT waits on that transaction; then the first
 * request commits. The engine must answer from the first request's record
 * and run nothing.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, IdempotencyKeyMismatchError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase();
let pool: pg.Pool;
beforeAll(() => {
  pool = new pg.Pool({ connectionString: t.url, max: 3 });
  // The test database is dropped with FORCE at the end: an idle backend's termination is no error here.
  pool.on("error", () => undefined).on("connect", (client) => client.on("error", () => undefined));
});
afterAll(() => pool.end());

const T = "nac";
const NAME = "fault_non_atomic_claim";

describe("two first requests for one key", () => {
  it("the engine's claim, whose INSERT waited on a first request's uncommitted claim, answers from that record and runs nothing", async () => {
    const first = await pool.connect();
    await first.query("BEGIN");
    // The first request's claim, with a fingerprint of its own (another payload), a live lease and owner 'first'.
    const held = await first.query(
      `SELECT claimed FROM idempo.claim_new_key($1, $2, 'run-first', $3, 1, '[]', 'h', 'first-payload', '{}', NULL,
         'first', 300000, 86400000, 0)`,
      [T, "k", NAME],
    );
    expect(held.rows).toEqual([{ claimed: true }]);
    let calls = 0;
    const wf = workflow(NAME)
      .phase("work", () => {
        calls++;
        return {};
      })
      .respond(() => ({ status: 201, body: { mine: true } }));
    const engine = createEngine({ db: t.db });
    const second = engine.runOnce(wf, { tenantId: T, key: "k", input: { other: true } }).catch((e: unknown) => e);
    // Its read saw nothing (the first claim is uncommitted); its INSERT now waits on that transaction.
    await waitFor(async () => {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%claim_new_key%'`,
      );
      return rows[0].n > 0 ? true : undefined;
    }, 60_000);
    await first.query("COMMIT");
    first.release();
    expect(await second).toBeInstanceOf(IdempotencyKeyMismatchError);
    expect(calls).toBe(0);
    const { rows } = await pool.query("SELECT owner_token, status FROM idempo.runs WHERE tenant_id = $1 AND key = $2", [
      T,
      "k",
    ]);
    expect(rows).toEqual([{ owner_token: "first", status: "in_flight" }]);
  });
});
