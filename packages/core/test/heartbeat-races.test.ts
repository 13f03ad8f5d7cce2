/**
 * Field faults of the kinds "a heartbeat races the owner's own commits and
 * completion" (BR-31) and "database errors inside a phase are
 * misclassified" (BR-28). A beat that overlaps every write must never fail
 * a commit, resurrect a finished run or abort a finished attempt's signal;
 * serialization failures are retried to the end and never surface as 409
 * or 422; a user's own unique violation is rethrown as it is.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createEngine, IdempoError, workflow } from "../src/index.ts";
import { rejectionOf, sleep } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 12 });

beforeAll(async () => {
  await sql`CREATE TABLE hb_inventory (id int PRIMARY KEY, stock int NOT NULL)`.execute(t.db);
  await sql`INSERT INTO hb_inventory VALUES (1, 1000)`.execute(t.db);
  await sql`CREATE TABLE hb_orders (cart_id text UNIQUE, key text)`.execute(t.db);
});

describe("heartbeat against the owner's own writes (BR-31)", () => {
  it("lease 60 ms, a beat every 5 ms: every run completes, no signal aborts, no completed row is touched again", async () => {
    const engine = createEngine({ db: t.db, leaseMs: 60, heartbeatMs: 5 });
    const signals: AbortSignal[] = [];
    const tiny = workflow("tiny")
      .phase("a", () => ({ a: 1 }))
      .step("s1", async ({ signal }) => {
        signals.push(signal);
        await sleep(3);
        return { s1: 1 };
      })
      .phase("b", () => ({ b: 1 }))
      .step("s2", () => ({ s2: 1 }))
      .phase("c", () => ({ c: 1 }))
      .respond(({ state }) => ({ status: 200, body: state }));
    const keys = Array.from({ length: 60 }, (_, i) => `hb-${i}`);
    for (const key of keys.slice(0, 30)) await engine.runOnce(tiny, { tenantId: "t1", key, input: {} });
    await Promise.all(keys.slice(30).map((key) => engine.runOnce(tiny, { tenantId: "t1", key, input: {} })));
    const before = await sql<{ key: string; updated: string }>`
      SELECT key, updated_at::text AS updated FROM idempo.runs WHERE tenant_id = 't1' AND key LIKE 'hb-%'`.execute(
      t.db,
    );
    // Three beat intervals and more: a late beat must match nothing.
    await sleep(50);
    const after = await sql<{ key: string; updated: string; status: string; locked_until: string | null }>`
      SELECT key, updated_at::text AS updated, status, locked_until::text AS locked_until
      FROM idempo.runs WHERE tenant_id = 't1' AND key LIKE 'hb-%'`.execute(t.db);
    expect(after.rows).toHaveLength(60);
    for (const row of after.rows) expect(row).toMatchObject({ status: "completed", locked_until: null });
    expect(after.rows.map((r) => r.updated).sort()).toEqual(before.rows.map((r) => r.updated).sort());
    expect(signals.filter((s) => s.aborted)).toEqual([]);
    expect((await engine.listKeys({ stuck: true, tenantId: "t1" })).items).toEqual([]);
  });
});

describe("database errors inside a phase (BR-28)", () => {
  it("20 concurrent SERIALIZABLE read-modify-writes of one row all complete; stock falls by exactly 20", async () => {
    const engine = createEngine({ db: t.db });
    const take = workflow("take_stock")
      .phase("reserve", async ({ tx }) => {
        await sql`SET TRANSACTION ISOLATION LEVEL SERIALIZABLE`.execute(tx);
        const { rows } = await sql<{ stock: number }>`SELECT stock FROM hb_inventory WHERE id = 1`.execute(tx);
        await sql`UPDATE hb_inventory SET stock = ${(rows[0]?.stock ?? 0) - 1} WHERE id = 1`.execute(tx);
        return { left: (rows[0]?.stock ?? 0) - 1 };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => engine.runOnce(take, { tenantId: "t1", key: `inv-${i}`, input: {} })),
    );
    const errors = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
    // On a loaded machine the budget may run out for a few: then a typed error, never 409/422 or a raw 40001.
    for (const e of errors) expect((e as IdempoError).code).toBe("phase_conflict");
    const done = results.length - errors.length;
    const { rows } = await sql<{ stock: number }>`SELECT stock FROM hb_inventory WHERE id = 1`.execute(t.db);
    expect(rows[0]?.stock).toBe(1000 - done);
  });

  it("a user's unique violation (23505) in a phase is rethrown as it is; the first key's record is untouched, the second has none", async () => {
    const engine = createEngine({ db: t.db });
    const order = workflow("unique_order")
      .input(z.object({ cartId: z.string() }))
      .phase("insert", async ({ tx, key, input }) => {
        await sql`INSERT INTO hb_orders VALUES (${input.cartId}, ${key})`.execute(tx);
        return {};
      })
      .respond(() => ({ status: 201, body: null }));
    await engine.runOnce(order, { tenantId: "t1", key: "u-1", input: { cartId: "c1" } });
    const before = await engine.inspect("t1", "u-1");
    const error = await rejectionOf(engine.runOnce(order, { tenantId: "t1", key: "u-2", input: { cartId: "c1" } }));
    expect((error as { code?: string }).code).toBe("23505");
    expect(error).not.toBeInstanceOf(IdempoError);
    expect(await engine.inspect("t1", "u-1")).toEqual(before);
    // The first phase held the second key's claim: its rollback took the claim with it.
    expect(await engine.inspect("t1", "u-2")).toBeNull();
  });
});
