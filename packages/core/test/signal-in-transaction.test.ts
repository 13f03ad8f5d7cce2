/**
 * `engine.signal(..., { tx })`: the signal is written in the caller's own
 * transaction, as `enqueue` does, so it exists exactly when that
 * transaction commits. The wake-up (NOTIFY) is part of the same
 * transaction: a waiting run is woken after the commit, never before, and
 * a rollback leaves no signal and no wake-up. Real connections throughout.
 */
import type { Kysely } from "kysely";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import {
  createEngine,
  IdempotencyKeyInProgressError,
  InputValidationError,
  InvalidOptionError,
  workflow,
} from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 8 });
const T = "acme";
let listen: pg.Client;

beforeAll(async () => {
  listen = new pg.Client({ connectionString: t.url });
  await listen.connect();
});
afterAll(async () => {
  await listen?.end();
});

function confirmation(name: string) {
  return workflow(name)
    .phase("authorise", () => ({ authorised: true }))
    .waitFor("confirmed", { schema: z.object({ ok: z.boolean() }) })
    .respond(({ state }) => ({ status: 201, body: state }));
}

async function signalCount(key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

async function orderCount(id: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE id = ${id}`.execute(t.db);
  return rows[0]?.n ?? -1;
}

// biome-ignore lint/suspicious/noExplicitAny: the test database has no typed schema
async function insertOrder(db: Kysely<any>, id: string): Promise<void> {
  await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${id}, ${T}, 'c', 100)`.execute(db);
}

/** A client that counts the NOTIFYs on the workers' channel; `seen()` makes a round trip first. */
async function dueListener() {
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  onTestFinished(() => client.end());
  let count = 0;
  client.on("notification", (n) => {
    if (n.channel === "idempo_due") count++;
  });
  await client.query("LISTEN idempo_due");
  return {
    // A notification committed before this query is delivered no later than its answer.
    seen: async () => {
      await client.query("SELECT 1");
      return count;
    },
  };
}

describe("engine.signal with { tx }", () => {
  it("commits with the caller's transaction: the waiting run is woken after the commit, never before", async () => {
    const engine = createEngine({ db: t.db, listen });
    const wf = confirmation("tx_signal_commit");
    const worker = engine.startWorker({ workflows: [wf], intervalMs: 600_000, sweep: false, listen });
    onTestFinished(() => worker.stop());
    expect((await engine.runOnce(wf, { tenantId: T, key: "c1", input: {} })).status).toBe(202);
    const due = await dueListener();
    const notifiedBefore = await due.seen();

    await t.db.transaction().execute(async (tx) => {
      await insertOrder(tx, "o-c1");
      expect(await engine.signal(T, "c1", "confirmed", { ok: true }, { tx })).toEqual({
        duplicate: false,
        woke: true,
      });
      // Seen from outside the transaction: nothing yet.
      expect(await signalCount("c1")).toBe(0);
      const rec = await engine.inspect(T, "c1");
      expect(rec?.status).toBe("suspended");
      expect(rec?.wakeAt).toBeNull();
      expect(await due.seen()).toBe(notifiedBefore);
    });

    expect(await signalCount("c1")).toBe(1);
    expect(await orderCount("o-c1")).toBe(1);
    expect(await due.seen()).toBeGreaterThan(notifiedBefore);
    // The worker polls every ten minutes: only the NOTIFY sent on commit can have woken it.
    expect(await engine.wait(T, "c1", { timeoutMs: 120_000 })).toMatchObject({
      status: 201,
      body: { confirmed: { ok: true } },
    });
  });

  it("rolls back with the caller's transaction: no signal, no wake-up, and the same signal is new again", async () => {
    const engine = createEngine({ db: t.db });
    const wf = confirmation("tx_signal_rollback");
    await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} });
    const due = await dueListener();
    const notifiedBefore = await due.seen();

    const boom = new Error("the application's own write failed");
    await expect(
      t.db.transaction().execute(async (tx) => {
        await engine.signal(T, "r1", "confirmed", { ok: true }, { tx });
        await insertOrder(tx, "o-r1");
        throw boom;
      }),
    ).rejects.toBe(boom);

    expect(await signalCount("r1")).toBe(0);
    expect(await orderCount("o-r1")).toBe(0);
    expect(await due.seen()).toBe(notifiedBefore);
    const rec = await engine.inspect(T, "r1");
    expect(rec?.status).toBe("suspended");
    expect(rec?.wakeAt).toBeNull();
    const busy = await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} }).catch((e) => e);
    expect(busy).toBeInstanceOf(IdempotencyKeyInProgressError);

    expect(await engine.signal(T, "r1", "confirmed", { ok: true })).toEqual({ duplicate: false, woke: true });
    expect(await engine.runOnce(wf, { tenantId: T, key: "r1", input: {} })).toMatchObject({ status: 201 });
  });

  it("a refused signal leaves the caller's transaction usable and writes nothing", async () => {
    const engine = createEngine({ db: t.db });
    const wf = confirmation("tx_signal_refused");
    await engine.runOnce(wf, { tenantId: T, key: "f1", input: {} });
    await t.db.transaction().execute(async (tx) => {
      await expect(engine.signal(T, "f1", "confirmed", { ok: "yes" }, { tx })).rejects.toBeInstanceOf(
        InputValidationError,
      );
      await insertOrder(tx, "o-f1");
    });
    expect(await orderCount("o-f1")).toBe(1);
    expect(await signalCount("f1")).toBe(0);
  });

  it("two transactions signal one run at once: the second waits for the first to commit and counts once", async () => {
    const engine = createEngine({ db: t.db });
    const wf = confirmation("tx_signal_race");
    await engine.runOnce(wf, { tenantId: T, key: "d1", input: {} });
    const other = t.connect(2);

    let commitFirst!: () => void;
    const held = new Promise<void>((r) => {
      commitFirst = r;
    });
    let signalled!: () => void;
    const firstSignalled = new Promise<void>((r) => {
      signalled = r;
    });
    const first = t.db.transaction().execute(async (tx) => {
      const res = await engine.signal(T, "d1", "confirmed", { ok: true }, { tx });
      signalled();
      await held;
      return res;
    });
    await firstSignalled;
    const second = other.transaction().execute(async (tx) => engine.signal(T, "d1", "confirmed", { ok: true }, { tx }));
    // The second holds no lock yet: it waits on the run's row, which the first holds.
    await expect
      .poll(
        async () => {
          const { rows } = await sql<{ n: number }>`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%idempo:signal_lock%'`.execute(
            t.db,
          );
          return rows[0]?.n;
        },
        { timeout: 60_000 },
      )
      .toBe(1);
    commitFirst();
    expect(await first).toEqual({ duplicate: false, woke: true });
    expect(await second).toEqual({ duplicate: true, woke: false });
    expect(await signalCount("d1")).toBe(1);
  });

  it("refuses a tx that is not a transaction, and an unknown option", async () => {
    const engine = createEngine({ db: t.db });
    const wf = confirmation("tx_signal_options");
    await engine.runOnce(wf, { tenantId: T, key: "x1", input: {} });
    const notTx = await engine.signal(T, "x1", "confirmed", { ok: true }, { tx: t.db as never }).catch((e) => e);
    expect(notTx).toBeInstanceOf(InvalidOptionError);
    expect(notTx.message).toContain("tx");
    const misspelt = await engine
      .signal(T, "x1", "confirmed", { ok: true }, { transaction: {} } as never)
      .catch((e) => e);
    expect(misspelt).toBeInstanceOf(InvalidOptionError);
    expect(misspelt.message).toContain("transaction");
    expect(await signalCount("x1")).toBe(0);
  });
});
