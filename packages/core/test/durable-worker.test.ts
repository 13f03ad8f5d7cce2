/**
 * Background runs: `enqueue` inside the caller's transaction, and workers
 * that execute due suspended runs (enqueued, woken, signalled) once each,
 * fairly across tenants, within per-workflow limits, woken by NOTIFY with
 * polling as the guarantee. Every verdict counts executions; none times them.
 */
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, Worker } from "../src/index.ts";
import {
  createEngine,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  workflow,
} from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 10 });
let listener: pg.Client;

beforeAll(async () => {
  listener = new pg.Client({ connectionString: t.url });
  await listener.connect();
});
afterAll(async () => {
  await listener?.end();
});

function worker(engine: Engine, opts: Parameters<Engine["startWorker"]>[0]): Worker {
  const w = engine.startWorker({ sweep: false, ...opts });
  onTestFinished(() => w.stop());
  return w;
}

async function statusCounts(workflowName: string): Promise<Record<string, number>> {
  const { rows } = await sql<{ status: string; n: number }>`
    SELECT status, count(*)::int AS n FROM idempo.runs WHERE workflow = ${workflowName} GROUP BY status`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 120_000, interval: 25, message: what }).toBe(true);
};

describe("engine.enqueue", () => {
  it("the run exists exactly when the caller's transaction commits; same claim rules as runOnce", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("enq_rules")
      .input(z.object({ amount: z.number().int() }))
      .phase("a", () => ({ a: 1 }))
      .respond(({ state }) => ({ status: 201, body: state }));

    await t.db
      .transaction()
      .execute(async (tx) => {
        expect(await engine.enqueue(tx, wf, { tenantId: "t", key: "rolled", input: { amount: 1 } })).toEqual({
          created: true,
        });
        throw new Error("the caller's transaction fails");
      })
      .catch(() => undefined);
    expect(await engine.inspect("t", "rolled")).toBeNull();

    const created = await t.db.transaction().execute(async (tx) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES ('o_enq', 't', 'c', 1)`.execute(tx);
      return engine.enqueue(tx, wf, { tenantId: "t", key: "k1", input: { amount: 1 } });
    });
    expect(created).toEqual({ created: true });
    const rec = await engine.inspect("t", "k1");
    expect(rec).toMatchObject({ status: "suspended", attempt: 0, recoveryPoint: null, waitingFor: null });
    expect(rec?.wakeAt).toBeInstanceOf(Date);

    expect(await engine.enqueue(t.db, wf, { tenantId: "t", key: "k1", input: { amount: 1.0 } })).toEqual({
      created: false,
    });
    await expect(engine.enqueue(t.db, wf, { tenantId: "t", key: "k1", input: { amount: 2 } })).rejects.toBeInstanceOf(
      IdempotencyKeyMismatchError,
    );
    await expect(
      engine.enqueue(t.db, wf, { tenantId: "t", key: "k2", input: { amount: "x" } as never }),
    ).rejects.toBeInstanceOf(InputValidationError);
    await expect(engine.enqueue(t.db, wf, { tenantId: "", key: "k2", input: { amount: 1 } })).rejects.toBeInstanceOf(
      InvalidIdempotencyKeyError,
    );
    expect(await engine.inspect("t", "k2")).toBeNull();

    // A runOnce with the same key and payload takes the enqueued run: attempt 1.
    expect(await engine.runOnce(wf, { tenantId: "t", key: "k1", input: { amount: 1 } })).toMatchObject({
      status: 201,
      replayed: false,
    });
    expect((await engine.inspect("t", "k1"))?.attempt).toBe(1);
    expect(await engine.enqueue(t.db, wf, { tenantId: "t", key: "k1", input: { amount: 1 } })).toEqual({
      created: false,
    });
  });

  it("a key past retention and tombstone counts as absent: enqueue starts a new run on it", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("enq_expired", { retentionMs: 1, tombstoneMs: 0 })
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await engine.runOnce(wf, { tenantId: "t", key: "old", input: {} });
    await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - interval '1 second'
              WHERE tenant_id = 't' AND key = 'old'`.execute(t.db);
    expect(await engine.enqueue(t.db, wf, { tenantId: "t", key: "old", input: {} })).toEqual({ created: true });
    expect(await engine.inspect("t", "old")).toMatchObject({ status: "suspended", attempt: 0, history: [] });
  });
});

describe("engine.startWorker runs due suspended runs", () => {
  it("wakes on NOTIFY when the enqueueing transaction commits (the poll interval is ten minutes)", async () => {
    const engine = createEngine({ db: t.db, listen: listener });
    const wf = workflow("enq_notify")
      .phase("a", () => ({ done: true }))
      .respond(({ state }) => ({ status: 201, body: state }));
    const listen = new pg.Client({ connectionString: t.url });
    await listen.connect();
    onTestFinished(() => listen.end());
    worker(engine, { workflows: [wf], intervalMs: 600_000, listen });
    // The worker's LISTEN is in place before the enqueue commits (its client ran nothing else).
    await until(async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND query = 'LISTEN idempo_due'`.execute(t.db);
      return rows[0]?.n === 1;
    }, "the worker listens");
    await engine.enqueue(t.db, wf, { tenantId: "t", key: "n1", input: {} });
    expect(await engine.wait("t", "n1", { timeoutMs: 120_000 })).toMatchObject({
      status: 201,
      body: { done: true },
      replayed: true,
    });
  });

  it("two workers in two engines race over the same runs: each run is executed once", async () => {
    const executions = new Map<string, number>();
    const wf = workflow("enq_race")
      .phase("a", ({ key }) => {
        executions.set(key, (executions.get(key) ?? 0) + 1);
        return {};
      })
      .sleep("nap", 0)
      .step("b", ({ key }) => {
        executions.set(`${key}:b`, (executions.get(`${key}:b`) ?? 0) + 1);
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const first = createEngine({ db: t.connect(4) });
    const second = createEngine({ db: t.connect(4) });
    const n = 40;
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < n; i++) await first.enqueue(tx, wf, { tenantId: `t${i % 3}`, key: `r${i}`, input: {} });
    });
    worker(first, { workflows: [wf], intervalMs: 20, concurrency: 4 });
    worker(second, { workflows: [wf], intervalMs: 20, concurrency: 4 });
    await until(async () => (await statusCounts("enq_race")).completed === n, "all runs completed");
    for (let i = 0; i < n; i++) {
      expect(executions.get(`r${i}`), `r${i}`).toBe(1);
      expect(executions.get(`r${i}:b`), `r${i}:b`).toBe(1);
    }
    const { rows } = await sql<{
      attempt: number;
    }>`SELECT DISTINCT attempt FROM idempo.runs WHERE workflow = 'enq_race'`.execute(t.db);
    // Resuming after the sleep was not a new attempt.
    expect(rows).toEqual([{ attempt: 1 }]);
  });

  it("one tenant's backlog of 1000 does not starve another tenant's single run", async () => {
    const order: string[] = [];
    const wf = workflow("enq_fair")
      .phase("a", ({ tenantId }) => {
        order.push(tenantId);
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const engine = createEngine({ db: t.db });
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < 1000; i++) await engine.enqueue(tx, wf, { tenantId: "big", key: `b${i}`, input: {} });
    });
    await engine.enqueue(t.db, wf, { tenantId: "small", key: "s0", input: {} });
    const w = worker(engine, { workflows: [wf], intervalMs: 20, concurrency: 1 });
    await until(async () => order.includes("small"), "the small tenant's run executed");
    await w.stop();
    // With one slot the order is exact: the big tenant's oldest run, then the small tenant's.
    expect(order.indexOf("small")).toBeLessThanOrEqual(1);
    expect(order.length).toBeLessThan(1000);
  });

  it("a per-workflow limit caps its runs in the worker while other workflows go on", async () => {
    let running = 0;
    let most = 0;
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const slow = workflow("enq_slow")
      .step("work", async () => {
        running++;
        most = Math.max(most, running);
        await gate;
        running--;
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const fast = workflow("enq_fast")
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    const engine = createEngine({ db: t.db });
    for (let i = 0; i < 8; i++) await engine.enqueue(t.db, slow, { tenantId: "t", key: `slow${i}`, input: {} });
    const w = worker(engine, {
      workflows: [slow, fast],
      intervalMs: 20,
      concurrency: 10,
      workflowConcurrency: { enq_slow: 2 },
    });
    await until(async () => running === 2, "two slow runs started");
    for (let i = 0; i < 5; i++) await engine.enqueue(t.db, fast, { tenantId: "t", key: `fast${i}`, input: {} });
    await until(async () => (await statusCounts("enq_fast")).completed === 5, "the fast runs completed");
    expect(running).toBe(2);
    open();
    await until(async () => (await statusCounts("enq_slow")).completed === 8, "the slow runs completed");
    await w.stop();
    expect(most).toBe(2);
  });

  it("a worker stopped while its runs sleep: another worker in another engine finishes them", async () => {
    const calls = { before: 0, after: 0 };
    const wf = workflow("enq_sleepers")
      .phase("before", () => {
        calls.before++;
        return {};
      })
      .sleep("nap", 60 * 60 * 1000)
      .phase("after", () => {
        calls.after++;
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const first = createEngine({ db: t.connect(3) });
    for (let i = 0; i < 6; i++) await first.enqueue(t.db, wf, { tenantId: "t", key: `z${i}`, input: {} });
    const w1 = first.startWorker({ workflows: [wf], intervalMs: 20, sweep: false });
    await until(async () => (await statusCounts("enq_sleepers")).suspended === 6 && calls.before === 6, "all asleep");
    await w1.stop();
    await sql`UPDATE idempo.runs SET wake_at = clock_timestamp() WHERE workflow = 'enq_sleepers'`.execute(t.db);
    const second = createEngine({ db: t.connect(3) });
    worker(second, { workflows: [wf], intervalMs: 20 });
    await until(async () => (await statusCounts("enq_sleepers")).completed === 6, "all completed");
    expect(calls).toEqual({ before: 6, after: 6 });
  });

  it("a worker whose process dies in a woken run: the run's lease runs out and another worker finishes it", async () => {
    const calls = { before: 0, after: 0 };
    const wf = workflow("enq_crashed")
      .phase("before", () => {
        calls.before++;
        return {};
      })
      .sleep("nap", 0)
      .phase("after", () => {
        calls.after++;
        return {};
      })
      .respond(() => ({ status: 200, body: null }));
    const first = createEngine({ db: t.connect(3) });
    // The first worker "dies" right before the phase after the sleep, in every run.
    let crashes = 0;
    setFaultHook(first, (point) => {
      if (point !== "before:phase:after") return;
      crashes++;
      throw new CrashSignal(point);
    });
    for (let i = 0; i < 4; i++) await first.enqueue(t.db, wf, { tenantId: "t", key: `c${i}`, input: {} });
    const w1 = first.startWorker({ workflows: [wf], intervalMs: 20, sweep: false });
    await until(async () => crashes === 4, "all four cut off");
    await w1.stop();
    for (let i = 0; i < 4; i++) await first.release("t", `c${i}`); // as if their leases ran out
    const second = createEngine({ db: t.connect(3) });
    worker(second, { workflows: [wf], intervalMs: 20 });
    await until(async () => (await statusCounts("enq_crashed")).completed === 4, "all completed");
    expect(calls).toEqual({ before: 4, after: 4 });
    const { rows } = await sql<{ attempt: number }>`
      SELECT DISTINCT attempt FROM idempo.runs WHERE workflow = 'enq_crashed'`.execute(t.db);
    // The takeover after the crash is a new attempt; the resume after the sleep was not.
    expect(rows).toEqual([{ attempt: 2 }]);
  });

  it("a short sleep is resumed by a worker that only polls, at its wake-up time", async () => {
    const wf = workflow("enq_short")
      .sleep("nap", 50)
      .respond(() => ({ status: 200, body: { woke: true } }));
    const engine = createEngine({ db: t.db });
    expect((await engine.runOnce(wf, { tenantId: "t", key: "short", input: {} })).status).toBe(202);
    // The poll interval is long; the worker looks again at the next known wake-up time.
    worker(engine, { workflows: [wf], intervalMs: 600_000 });
    expect(await engine.wait("t", "short", { timeoutMs: 120_000 })).toMatchObject({
      status: 200,
      body: { woke: true },
    });
  });

  it("refuses a limit for a workflow it does not run", () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("w")
      .phase("a", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    expect(() => engine.startWorker({ workflows: [wf], workflowConcurrency: { other: 1 } })).toThrow(
      /not in workflows/,
    );
    expect(() => engine.startWorker({ workflows: [wf], concurrency: 0 })).toThrow(/concurrency must be an integer/);
    // Not an object: refused, not silently ignored.
    for (const bad of [5, "w", [1]]) {
      expect(() =>
        engine.startWorker({ workflows: [wf], workflowConcurrency: bad as unknown as Record<string, number> }),
      ).toThrow(/workflowConcurrency must be an object/);
    }
  });
});
