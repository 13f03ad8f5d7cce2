/**
 * `.concurrency`, `rateLimit` and priorities in one process, on real
 * parallel connections: a run over its limit is answered as in progress and
 * waits stepped aside (suspended, due, holding nothing) without blocking
 * the runs behind it in a worker's choice; a holder whose lease ran out and
 * whose slot was taken cannot renew; a suspended run holds no slot; a token
 * due after the step's timeout suspends the run until it is due; workers
 * take a tenant's due runs by priority within each tenant's fair share.
 * Verdicts count rows and executions; waits are bounded by work.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import type { Engine, Worker } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { acquireSlot, renewSlotLease } from "../src/store/concurrency-slots.ts";
import { tablesIn } from "../src/store/run-store.ts";
import { useTestDatabase } from "./support/db.ts";
import { executorOf } from "./support/executor.ts";

const t = useTestDatabase({ pool: 12 });

function worker(engine: Engine, opts: Parameters<Engine["startWorker"]>[0]): Worker {
  const w = engine.startWorker({ sweep: false, schedules: false, intervalMs: 100, ...opts });
  onTestFinished(() => w.stop());
  return w;
}

const until = async (check: () => boolean | Promise<boolean>, what: string) => {
  // Generous: bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout: 60_000, interval: 20, message: what }).toBe(true);
};

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe(".concurrency in runOnce", () => {
  it("over the limit: 409 with a retryAfterMs, the run waits suspended and due, and a retry runs it once a slot frees", async () => {
    const engine = createEngine({ db: t.db });
    const release = gate();
    const calls: string[] = [];
    const wf = workflow("lim_one")
      .concurrency({ key: ({ tenantId }) => tenantId, max: 1 })
      .step("work", async ({ key }) => {
        calls.push(key);
        if (key === "first") await release.opened;
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    const first = engine.runOnce(wf, { tenantId: "acme", key: "first", input: {} });
    await until(() => calls.includes("first"), "the first run holds the slot");

    const refused = await engine.runOnce(wf, { tenantId: "acme", key: "second", input: {} }).catch((e) => e);
    expect(refused).toBeInstanceOf(IdempotencyKeyInProgressError);
    expect((refused as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
    expect(await engine.inspect("acme", "second")).toMatchObject({ status: "suspended", ownerToken: null });
    // Another tenant's key is another limit.
    expect(await engine.runOnce(wf, { tenantId: "other", key: "second", input: {} })).toMatchObject({ status: 200 });

    release.open();
    expect(await first).toMatchObject({ status: 200 });
    expect(await engine.runOnce(wf, { tenantId: "acme", key: "second", input: {} })).toMatchObject({
      status: 200,
      replayed: false,
    });
    expect(calls.filter((k) => k === "second")).toHaveLength(2); // acme's and other's, each once
  });

  it("ten callers at once on real connections, max 2, waitInFlightMs: never more than 2 execute, all finish", async () => {
    const engine = createEngine({ db: t.db });
    let running = 0;
    let peak = 0;
    const wf = workflow("lim_two")
      .concurrency({ key: () => "shared", max: 2 })
      .step("work", async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setTimeout(resolve, 30));
        running--;
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        engine.runOnce(wf, { tenantId: "acme", key: `k${i}`, input: {}, waitInFlightMs: 60_000 }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(peak).toBeLessThanOrEqual(2);
  });

  it("a suspended run holds no slot: while one sleeps, another key of the limit runs", async () => {
    const engine = createEngine({ db: t.db });
    const wf = workflow("lim_sleep")
      .concurrency({ key: () => "one", max: 1 })
      .sleep("nap", 60_000)
      .respond(() => ({ status: 200, body: null }));
    expect(await engine.runOnce(wf, { tenantId: "acme", key: "a", input: {} })).toMatchObject({ status: 202 });
    expect(await engine.runOnce(wf, { tenantId: "acme", key: "b", input: {} })).toMatchObject({ status: 202 });
  });
});

describe("a holder and its slot, statement by statement", () => {
  const tables = tablesIn("idempo");
  const inFlight = async (key: string, owner: string, leaseMs: number) => {
    await sql`INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                                       input, status, owner_token, locked_until, retention_ms)
              VALUES ('slots', ${key}, ${`run-${key}`}, 'w', '[]', 'h', 'f', '{}', 'in_flight', ${owner},
                      clock_timestamp() + ${leaseMs} * interval '1 millisecond', 1000)`.execute(t.db);
  };
  const attempt = (key: string, owner: string) => ({ tenantId: "slots", key, ownerToken: owner });
  const slot = { limitKey: "w\u001fk", max: 1 };

  it("twenty takers at once on real connections, three slots: exactly three take one", async () => {
    for (let i = 0; i < 20; i++) await inFlight(`race-${i}`, `o-${i}`, 60_000);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        acquireSlot(executorOf(t.db), tables, attempt(`race-${i}`, `o-${i}`), { limitKey: "race", max: 3 }),
      ),
    );
    expect(answers.filter((a) => a.kind === "acquired")).toHaveLength(3);
    expect(answers.filter((a) => a.kind === "full")).toHaveLength(17);
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = 'slots' AND key LIKE 'race-%' AND status = 'suspended'`.execute(
      t.db,
    );
    expect(rows[0]?.n).toBe(17); // each refused run stepped aside
  });

  it("a live holder keeps its slot; once its lease ran out a taker gets it, and the old holder's renewal fails", async () => {
    await inFlight("h1", "old", 300);
    await inFlight("h2", "new", 60_000);
    expect(await acquireSlot(executorOf(t.db), tables, attempt("h1", "old"), slot)).toEqual({ kind: "acquired" });
    expect(await renewSlotLease(executorOf(t.db), tables, attempt("h1", "old"), 300, slot.limitKey)).toBe(true);
    expect((await acquireSlot(executorOf(t.db), tables, attempt("h2", "new"), slot)).kind).toBe("full");
    // h2 stepped aside; back in flight for the next try, as a take of a due run would put it.
    await sql`UPDATE idempo.runs SET status = 'in_flight', owner_token = 'new',
              locked_until = clock_timestamp() + interval '1 minute' WHERE tenant_id = 'slots' AND key = 'h2'`.execute(
      t.db,
    );
    await until(async () => {
      const { rows } = await sql<{ expired: boolean }>`
        SELECT locked_until <= clock_timestamp() AS expired FROM idempo.runs WHERE tenant_id = 'slots' AND key = 'h1'`.execute(
        t.db,
      );
      return rows[0]?.expired === true;
    }, "the holder's lease ran out");
    expect(await acquireSlot(executorOf(t.db), tables, attempt("h2", "new"), slot)).toEqual({ kind: "acquired" });
    // A holder paused past its lease cannot renew it back beside the new holder.
    expect(await renewSlotLease(executorOf(t.db), tables, attempt("h1", "old"), 60_000, slot.limitKey)).toBe(false);
    expect(await renewSlotLease(executorOf(t.db), tables, attempt("h2", "new"), 60_000, slot.limitKey)).toBe(true);
  });

  it("a holder paused past its lease whose slot was taken cannot commit back beside the new holder", async () => {
    const advance = async (key: string, owner: string, complete = false) => {
      const { rows } = await sql<{ ok: boolean }>`
        SELECT idempo.advance_run('slots', ${key}, ${owner}, 'p', '{}'::json, 60000,
                                  ${complete ? "succeeded" : null}, ${complete ? 200 : null}, NULL) AS ok`.execute(
        t.db,
      );
      return rows[0]?.ok;
    };
    const leaseEnded = (key: string) =>
      until(async () => {
        const { rows } = await sql<{ expired: boolean }>`
          SELECT locked_until <= clock_timestamp() AS expired FROM idempo.runs WHERE tenant_id = 'slots' AND key = ${key}`.execute(
          t.db,
        );
        return rows[0]?.expired === true;
      }, `the lease of ${key} ran out`);
    const fence = { limitKey: "w\u001ffence", max: 1 };
    await inFlight("p1", "old", 300);
    expect(await acquireSlot(executorOf(t.db), tables, attempt("p1", "old"), fence)).toEqual({ kind: "acquired" });
    await leaseEnded("p1");
    // Its lease ran out but nobody took the slot: its commit goes ahead and re-arms it.
    expect(await advance("p1", "old")).toBe(true);
    await sql`UPDATE idempo.runs SET locked_until = clock_timestamp() WHERE tenant_id = 'slots' AND key = 'p1'`.execute(
      t.db,
    );
    await inFlight("p2", "new", 60_000);
    expect(await acquireSlot(executorOf(t.db), tables, attempt("p2", "new"), fence)).toEqual({ kind: "acquired" });
    // The slot is p2's now: p1's commits, a step result's and a completing one, are fenced.
    expect(await advance("p1", "old")).toBe(false);
    expect(await advance("p1", "old", true)).toBe(false);
    const { rows } = await sql<{ status: string; live: boolean }>`
      SELECT status, locked_until > clock_timestamp() AS live FROM idempo.runs WHERE tenant_id = 'slots' AND key = 'p1'`.execute(
      t.db,
    );
    expect(rows[0]).toEqual({ status: "in_flight", live: false });
    // The new holder commits as usual.
    expect(await advance("p2", "new")).toBe(true);
  });

  it("an attempt with a live lease and no slot (its version dropped the limit) still commits", async () => {
    await inFlight("v1", "own", 60_000);
    await sql`UPDATE idempo.runs SET concurrency_key = 'w\u001fgone', concurrency_max = 1
              WHERE tenant_id = 'slots' AND key = 'v1'`.execute(t.db);
    const { rows } = await sql<{ ok: boolean }>`
      SELECT idempo.advance_run('slots', 'v1', 'own', 'p', '{}'::json, 60000, NULL, NULL, NULL) AS ok`.execute(t.db);
    expect(rows[0]?.ok).toBe(true);
  });
});

describe(".concurrency in a worker's choice", () => {
  it("a due run over its limit does not block the runs behind it", async () => {
    const engine = createEngine({ db: t.db });
    const release = gate();
    const ran: string[] = [];
    const limited = workflow("lim_block")
      .concurrency({ key: () => "one", max: 1 })
      .step("work", async ({ key }) => {
        ran.push(key);
        if (key === "holder") await release.opened;
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    const free = workflow("lim_free")
      .step("work", async ({ key }) => {
        ran.push(key);
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    const holding = engine.runOnce(limited, { tenantId: "acme", key: "holder", input: {} });
    await until(() => ran.includes("holder"), "the holder runs");
    // Oldest first: the limited run is ahead of the free ones in wake-up order.
    await engine.enqueue(t.db, limited, { tenantId: "acme", key: "waiting", input: {} });
    for (const key of ["free-1", "free-2", "free-3"])
      await engine.enqueue(t.db, free, { tenantId: "acme", key, input: {} });
    worker(engine, { workflows: [limited, free], concurrency: 1 });
    await until(() => ["free-1", "free-2", "free-3"].every((k) => ran.includes(k)), "the free runs ran");
    expect(ran).not.toContain("waiting");
    expect(await engine.inspect("acme", "waiting")).toMatchObject({ status: "suspended" });
    release.open();
    await holding;
    await until(() => ran.includes("waiting"), "the limited run ran once the slot freed");
    expect(await engine.wait("acme", "waiting", { timeoutMs: 60_000 })).toMatchObject({ status: 200 });
  });
});

describe("rateLimit on a step", () => {
  it("a token due after the step's timeout suspends the run until it is due; a worker then runs it", async () => {
    const engine = createEngine({ db: t.db, rateLimits: { slow: { perSecond: 1 } } });
    const calls: string[] = [];
    const wf = workflow("rate_suspend")
      .phase("before", () => ({ before: true }))
      .step(
        "call",
        ({ key }) => {
          calls.push(key);
          return { called: true };
        },
        { rateLimit: "slow", timeoutMs: 20 },
      )
      .respond(() => ({ status: 200, body: null }));
    expect(await engine.runOnce(wf, { tenantId: "acme", key: "r1", input: {} })).toMatchObject({ status: 200 });
    const second = await engine.runOnce(wf, { tenantId: "acme", key: "r2", input: {} });
    expect(second).toMatchObject({ status: 202, outcome: "suspended" });
    const rec = await engine.inspect("acme", "r2");
    expect(rec).toMatchObject({ status: "suspended", recoveryPoint: "before", waitingFor: null, ownerToken: null });
    expect(rec?.wakeAt).toBeInstanceOf(Date);
    // Suspended before the step started: no started entry, nothing called.
    expect(rec && "history" in rec ? rec.history?.filter((h) => h.kind === "step") : []).toEqual([]);
    expect(calls).toEqual(["r1"]);

    worker(engine, { workflows: [wf] });
    expect(await engine.wait("acme", "r2", { timeoutMs: 60_000 })).toMatchObject({ status: 200 });
    expect(calls).toEqual(["r1", "r2"]);
  });
});

describe("priorities", () => {
  it("one worker takes a tenant's priority-5 runs before its priority-0 runs, older first within each", async () => {
    const engine = createEngine({ db: t.db });
    const order: string[] = [];
    const wf = workflow("prio_order")
      .phase("work", ({ key }) => {
        order.push(key);
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    const urgent = workflow("prio_urgent")
      .priority(5)
      .phase("work", ({ key }) => {
        order.push(key);
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    await t.db.transaction().execute(async (tx) => {
      await engine.enqueue(tx, wf, { tenantId: "p", key: "low-1", input: {} });
      await engine.enqueue(tx, wf, { tenantId: "p", key: "high-1", input: {}, priority: 5 });
      await engine.enqueue(tx, wf, { tenantId: "p", key: "low-2", input: {} });
      await engine.enqueue(tx, urgent, { tenantId: "p", key: "high-2", input: {} }); // the workflow's priority
    });
    worker(engine, { workflows: [wf, urgent], concurrency: 1 });
    await until(() => order.length === 4, "all four ran");
    expect(order).toEqual(["high-1", "high-2", "low-1", "low-2"]);
  });

  it("the fair share across tenants still holds: one tenant's high priorities never keep another's turn", async () => {
    const engine = createEngine({ db: t.db });
    const order: string[] = [];
    const wf = workflow("prio_fair")
      .phase("work", ({ tenantId, key }) => {
        order.push(`${tenantId}/${key}`);
        return { done: true };
      })
      .respond(() => ({ status: 200, body: null }));
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < 4; i++)
        await engine.enqueue(tx, wf, { tenantId: "busy", key: `b${i}`, input: {}, priority: 9 });
      await engine.enqueue(tx, wf, { tenantId: "quiet", key: "q0", input: {} });
    });
    worker(engine, { workflows: [wf], concurrency: 1 });
    await until(() => order.length === 5, "all five ran");
    expect(order.slice(0, 2).sort()).toEqual(["busy/b0", "quiet/q0"]);
  });
});
