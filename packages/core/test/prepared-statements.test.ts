import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, withPreparedStatements, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
let db: Kysely<unknown>;

beforeAll(() => {
  // One connection, so the session that prepared the statements is the one asked below.
  db = new Kysely({
    dialect: new PostgresDialect({ pool: withPreparedStatements(new pg.Pool({ connectionString: t.url, max: 1 })) }),
  });
});
afterAll(() => db.destroy());

const wf = workflow("prepared")
  .phase("a", async ({ tx }) => {
    await sql`SELECT 1`.execute(tx);
    return { a: 1 };
  })
  .step("b", () => ({ b: 2 }))
  .respond(({ state }) => ({ status: 201, body: state }));

describe("withPreparedStatements", () => {
  it("prepares idempo's fixed statements once per connection and leaves other queries unnamed", async () => {
    const engine = createEngine({ db });
    for (let i = 0; i < 5; i++) {
      expect((await engine.runOnce(wf, { tenantId: "ps", key: `k${i}`, input: {} })).status).toBe(201);
      expect((await engine.runOnce(wf, { tenantId: "ps", key: `k${i}`, input: {} })).replayed).toBe(true);
    }
    const { rows } = await sql<{ name: string; statement: string }>`
      SELECT name, statement FROM pg_prepared_statements`.execute(db);
    const ours = rows.filter((r) => r.name.startsWith("idempo_"));
    // claim, phase commit, step started, step result (completing): one each, however many runs.
    expect(ours.map((r) => r.statement.match(/idempo:(\w+)/)?.[1]).sort()).toEqual([
      "claim",
      "commit_phase",
      "step_result",
      "step_started",
    ]);
    expect(rows.filter((r) => !r.name.startsWith("idempo_"))).toEqual([]);
  });

  it("behaves like the plain pool for every path", async () => {
    const engine = createEngine({ db, leaseMs: 5_000 });
    await expect(engine.runOnce(wf, { tenantId: "ps", key: "k0", input: { other: true } })).rejects.toMatchObject({
      code: "key_mismatch",
    });
    const rec = await engine.inspect("ps", "k0");
    expect(rec?.status).toBe("completed");
  });

  it("leaves the pool's own clients unchanged for other users of the pool", async () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 1 });
    const raw = await pool.connect();
    const ownQuery = raw.query;
    raw.release();
    const wrapped = await withPreparedStatements(pool).connect();
    await wrapped.query("/* idempo:probe */ SELECT $1::int AS n", [1]);
    wrapped.release();
    const again = await pool.connect();
    expect(again).toBe(raw);
    expect(again.query).toBe(ownQuery);
    again.release();
    await pool.end();
  });

  it("sends a call again unnamed, and names none from then on, when the session lost its statements (DISCARD ALL)", async () => {
    for (const preparedStatements of [true, false]) {
      const wrapped = new Kysely<unknown>({
        dialect: new PostgresDialect({
          pool: withPreparedStatements(new pg.Pool({ connectionString: t.url, max: 1 })),
        }),
      });
      try {
        const engine = createEngine({ db: wrapped, preparedStatements });
        const key = `lost-${preparedStatements}`;
        for (let round = 0; round < 3; round++) {
          // Each round drops whatever the engine or the wrapper had prepared on the one connection.
          expect((await engine.runOnce(wf, { tenantId: "ps", key: `${key}-${round}`, input: {} })).status).toBe(201);
          expect((await engine.runOnce(wf, { tenantId: "ps", key: `${key}-${round}`, input: {} })).replayed).toBe(true);
          await sql`DISCARD ALL`.execute(wrapped);
        }
        const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(
          wrapped,
        );
        expect(rows[0]?.n).toBe(0);
      } finally {
        await wrapped.destroy();
      }
    }
  });
});
