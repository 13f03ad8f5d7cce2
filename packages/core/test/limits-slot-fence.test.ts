/**
 * The slot fence beyond a phase or step commit: under `.concurrency`, an
 * attempt paused past its lease whose slot another attempt took is refused
 * at every write that would re-arm its lease or complete its run (a
 * `.parallel` branch's record, the move past a `.child` item, a completion
 * without a new recovery point), with `LeaseLostError` and nothing written,
 * as a fenced phase commit is (migrations 0022 and 0024, docs/limits.md).
 * Real parallel connections; waits bounded by work.
 */
import { sql } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { createEngine, deriveChildKey, LeaseLostError, workflow } from "../src/index.ts";
import { setFaultHook, setHeartbeatSilenced } from "../src/internal.ts";
import { acquireSlot } from "../src/store/concurrency-slots.ts";
import { tablesIn } from "../src/store/run-store.ts";
import { useTestDatabase } from "./support/db.ts";
import { executorOf } from "./support/executor.ts";
import { waitForLeaseExpiry } from "./support/faults.ts";
import { latch } from "./support/latch.ts";

const t = useTestDatabase({ pool: 12, name: "idempo_slot_fence" });

const until = async (check: () => boolean | Promise<boolean>, what: string, timeout = 30_000) => {
  // Bounded by work, never a verdict on speed.
  await expect.poll(check, { timeout, interval: 25, message: what }).toBe(true);
};

function hooked(engine: ReturnType<typeof createEngine>, hook: Parameters<typeof setFaultHook>[1]): void {
  setFaultHook(engine, hook);
  onTestFinished(() => setFaultHook(engine, undefined));
}

/**
 * Run p1 of tenant `tenantId` in flight as owner "old" with the slot of a max-1 key, wait for its lease to
 * run out, then let p2 (owner "new", a long lease) take the slot: p1 is a holder paused past its lease.
 */
async function slotTakenFromP1(tenantId: string): Promise<void> {
  const tables = tablesIn("idempo");
  const inFlight = async (key: string, owner: string, leaseMs: number) => {
    await sql`INSERT INTO idempo.runs (tenant_id, key, run_id, workflow, definition, definition_hash, fingerprint,
                                       input, status, owner_token, locked_until, retention_ms)
              VALUES (${tenantId}, ${key}, ${`run-${key}`}, 'w', '[]', 'h', 'f', '{}', 'in_flight', ${owner},
                      clock_timestamp() + ${leaseMs} * interval '1 millisecond', 1000)`.execute(t.db);
  };
  const fence = { limitKey: `w\u001f${tenantId}`, max: 1 };
  await inFlight("p1", "old", 300);
  expect(await acquireSlot(executorOf(t.db), tables, { tenantId, key: "p1", ownerToken: "old" }, fence)).toEqual({
    kind: "acquired",
  });
  await sql`INSERT INTO idempo.run_history (tenant_id, key, run_id, entry_id, kind, name, branch, attempt, outcome, started_at)
            VALUES (${tenantId}, 'p1', 'run-p1', 'e1', 'branch', 'fan', 'a', 1, 'started', clock_timestamp())`.execute(
    t.db,
  );
  await until(async () => {
    const { rows } = await sql<{ expired: boolean }>`
      SELECT locked_until <= clock_timestamp() AS expired FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = 'p1'`.execute(
      t.db,
    );
    return rows[0]?.expired === true;
  }, "the lease of p1 ran out");
  await inFlight("p2", "new", 60_000);
  expect(await acquireSlot(executorOf(t.db), tables, { tenantId, key: "p2", ownerToken: "new" }, fence)).toEqual({
    kind: "acquired",
  });
}

/** p1 as it stands: whether its lease is live, its status and its branch entry's outcome. */
async function p1(tenantId: string) {
  const { rows } = await sql<{ live: boolean | null; status: string; entry: string }>`
    SELECT r.locked_until > clock_timestamp() AS live, r.status, h.outcome AS entry
    FROM idempo.runs r JOIN idempo.run_history h ON h.tenant_id = r.tenant_id AND h.key = r.key AND h.entry_id = 'e1'
    WHERE r.tenant_id = ${tenantId} AND r.key = 'p1'`.execute(t.db);
  return rows[0];
}

describe(".concurrency and a holder paused past its lease", () => {
  // limits.md: "its next commit (... a `.parallel` branch's result, the move past a `.child` ...) and its next
  // heartbeat are refused once the slot is not its own"; SPEC: "at most `max` attempts with the same key
  // execute at once across every process". Before 0024 record_branch_result re-armed the lease fenced on the
  // owner token only; with a live lease and no slot naming it, the zombie's commit_parallel, its next phase
  // and its completion all passed: two live attempts of a max-1 key, the zombie answered 200.
  it("a parallel branch's record does not let it commit back beside the new holder", async () => {
    const zombieEngine = createEngine({ db: t.db, leaseMs: 500 });
    setHeartbeatSilenced(zombieEngine, true);
    onTestFinished(() => setHeartbeatSilenced(zombieEngine, false));
    const holder = createEngine({ db: t.connect(4), leaseMs: 30_000 });
    const zombieCalled = latch("the zombie's branch was called");
    const zombieGo = latch("the zombie's branch returns");
    const holderIn = latch("the new holder runs its branch");
    const holderGo = latch("the new holder's branch returns");
    onTestFinished(() => {
      zombieGo.open();
      holderGo.open();
    });
    const after: string[] = [];
    let liveBesideHolder = -1;
    const wf = workflow("as_par")
      .input(z.object({ who: z.string() }))
      .concurrency({ key: () => "one-at-a-time", max: 1 })
      .parallel("fan", (p) =>
        p.step("a", async ({ input }) => {
          if (input.who === "zombie") {
            zombieCalled.open();
            await zombieGo.wait(); // ignores its signal, as code paused by a long GC does
          } else {
            holderIn.open();
            await holderGo.wait();
          }
          return input.who;
        }),
      )
      .phase("after", async ({ input }) => {
        after.push(input.who);
        if (input.who === "zombie") {
          const { rows } = await sql<{ n: number }>`
            SELECT count(*)::int AS n FROM idempo.runs
            WHERE tenant_id = 'as' AND workflow = 'as_par' AND status = 'in_flight'
              AND locked_until > clock_timestamp()`.execute(t.db);
          liveBesideHolder = rows[0]?.n ?? 0;
        }
        return {};
      })
      .respond(({ input }) => ({ status: 200, body: input.who }));
    const zombie = zombieEngine.runOnce(wf, { tenantId: "as", key: "z", input: { who: "zombie" } }).then(
      (r) => r,
      (e: unknown) => e,
    );
    await zombieCalled.wait();
    await waitForLeaseExpiry(holder, "as", "z", 20_000);
    const second = holder.runOnce(wf, { tenantId: "as", key: "h", input: { who: "holder" } });
    await holderIn.wait();
    // The slot is the holder's now; the zombie's branch returns.
    zombieGo.open();
    const zombieResult = await zombie;
    holderGo.open();
    expect((await second).status).toBe(200);
    expect({ zombieResult: zombieResult instanceof LeaseLostError, after, liveBesideHolder }).toEqual({
      zombieResult: true,
      after: ["holder"],
      liveBesideHolder: -1,
    });
  });

  // Observed before 0024: record_branch_result answered true and p1's lease was live again beside p2.
  it("the statement that records a branch refuses a holder whose slot was taken (SQL level)", async () => {
    await slotTakenFromP1("aslots");
    const { rows } = await sql<{ ok: boolean }>`
      SELECT idempo.record_branch_result('aslots', 'p1', 'old', 'e1', 'succeeded', '"a"'::json, 60000, NULL) AS ok`.execute(
      t.db,
    );
    expect({ recorded: rows[0]?.ok, p1: await p1("aslots") }).toEqual({
      recorded: false,
      p1: { live: false, status: "in_flight", entry: "started" },
    });
  });

  // A completion without a new recovery point (ctx.fail, a wait's timeout) goes through mark_completed,
  // which refused only another owner's token before 0024.
  it("the completion without a recovery point refuses a holder whose slot was taken (SQL level)", async () => {
    await slotTakenFromP1("aslotc");
    const { rows } = await sql<{ ok: boolean }>`
      SELECT idempo.complete_run('aslotc', 'p1', 'old', 'failed', 422, '{"late":true}'::json) AS ok`.execute(t.db);
    expect({ completed: rows[0]?.ok, p1: await p1("aslotc") }).toEqual({
      completed: false,
      p1: { live: false, status: "in_flight", entry: "started" },
    });
  });

  // Before 0024 the move past a child item (advancePastWaitedItem, store/progress.ts) re-armed the lease fenced
  // on the owner token only, so the paused parent committed its fan-in, then its next phase
  // (slot_commit_allowed passes on the live lease).
  it("moving past a child item does not let it commit back beside the new holder", async () => {
    const zombieEngine = createEngine({ db: t.db, leaseMs: 500 });
    setHeartbeatSilenced(zombieEngine, true);
    onTestFinished(() => setHeartbeatSilenced(zombieEngine, false));
    const other = createEngine({ db: t.connect(4), leaseMs: 30_000 });
    const holderIn = latch("the new holder runs its first step");
    const holderGo = latch("the new holder goes on");
    const atRead = latch("the zombie reads its children");
    const zombieGo = latch("the zombie goes on");
    onTestFinished(() => {
      holderGo.open();
      zombieGo.open();
    });
    const after: string[] = [];
    const child = workflow("asc_child")
      .step("s", () => ({ ok: true }))
      .respond(() => ({ status: 200, body: "child" }));
    const wf = workflow("asc_parent")
      .input(z.object({ who: z.string() }))
      .concurrency({ key: () => "one-at-a-time", max: 1 })
      .step("first", async ({ input }) => {
        if (input.who === "holder") {
          holderIn.open();
          await holderGo.wait();
        }
        return {};
      })
      .child("c", child, () => ({}))
      .phase("after", ({ input }) => {
        after.push(input.who);
        return {};
      })
      .respond(({ input }) => ({ status: 200, body: input.who }));
    expect((await zombieEngine.runOnce(wf, { tenantId: "asc", key: "z", input: { who: "zombie" } })).outcome).toBe(
      "suspended",
    );
    // The child runs (a caller takes the due child), which makes the parent due.
    const childKey = deriveChildKey("asc", "z", "asc_parent", "c", 0);
    expect((await other.runOnce(child, { tenantId: "asc", key: childKey, input: {} })).status).toBe(200);
    hooked(zombieEngine, async (point) => {
      if (point !== "read:child:c") return;
      atRead.open();
      await zombieGo.wait();
    });
    // The zombie takes its due parent (a new attempt with the slot) and pauses at the fan-in.
    const zombie = zombieEngine.runOnce(wf, { tenantId: "asc", key: "z", input: { who: "zombie" } }).then(
      (r) => r,
      (e: unknown) => e,
    );
    await atRead.wait();
    await waitForLeaseExpiry(other, "asc", "z", 20_000);
    const second = other.runOnce(wf, { tenantId: "asc", key: "h", input: { who: "holder" } });
    await holderIn.wait();
    zombieGo.open();
    const zombieResult = await zombie;
    holderGo.open();
    await second.catch(() => undefined);
    expect({ zombieLost: zombieResult instanceof LeaseLostError, after }).toEqual({ zombieLost: true, after: [] });
  });
});
