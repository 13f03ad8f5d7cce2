import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";

// Statement round trips per runOnce path. Timings are never asserted; the
// number of statements is, so a regression in the hot path fails CI.
const t = useTestDatabase();
let statements: string[] = [];
let db: Kysely<unknown>;

beforeAll(() => {
  db = new Kysely({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: t.url, max: 4 }) }),
    log: (event) => {
      const text = event.query.sql.replace(/^\s*\/\*.*?\*\/\s*/s, "").trim();
      statements.push(text.split(/\s+/)[0]?.toLowerCase() ?? "");
    },
  });
});

afterAll(() => db.destroy());

async function measure(fn: () => Promise<unknown>): Promise<string[]> {
  statements = [];
  await fn().catch(() => undefined);
  return statements;
}

const onePhase = workflow("rt_one")
  .phase("write", async ({ tx, tenantId }) => {
    await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`rt_${Math.random()}`}, ${tenantId}, 'c', 1)`.execute(
      tx,
    );
    return { ok: true };
  })
  .respond(() => ({ status: 201, body: { ok: true } }));

const threeItems = workflow("rt_three")
  .phase("a", () => ({ a: 1 }))
  .step("b", () => ({ b: 2 }))
  .phase("c", () => ({ c: 3 }))
  .respond(({ state }) => ({ status: 201, body: state }));

describe("round trips per path", () => {
  it("new key with one phase: claim, then one transaction holding the business write and the completion", async () => {
    const engine = createEngine({ db });
    // Kysely issues begin and commit as their own statements.
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "new", input: {} }))).toEqual([
      "with", // claim
      "begin",
      "set", // the phase's lock_timeout (SET LOCAL)
      "insert", // business write
      "with", // recovery point + completion + history
      "commit",
    ]);
  });

  it("replay and 409 are one read-only statement each", async () => {
    const engine = createEngine({ db, leaseMs: 60_000 });
    await engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: {} });
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: {} }))).toEqual([
      "with",
    ]);
    setFaultHook(engine, (p) => {
      if (p === "before:phase:write") throw new CrashSignal(p);
    });
    await engine.runOnce(onePhase, { tenantId: "rt", key: "busy", input: {} }).catch(() => undefined);
    setFaultHook(engine, undefined);
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "busy", input: {} }))).toEqual(["with"]);
    // A refused payload costs the same single statement.
    expect(
      await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: { other: 1 } })),
    ).toEqual(["with"]);
  });

  it("phase / step / phase: one statement per boundary plus the phases' transactions", async () => {
    const engine = createEngine({ db });
    expect(await measure(() => engine.runOnce(threeItems, { tenantId: "rt", key: "three", input: {} }))).toEqual([
      "with", // claim
      "begin",
      "set", // lock_timeout
      "with", // phase a committed
      "commit",
      "with", // step b started
      "with", // step b recorded
      "begin",
      "set", // lock_timeout
      "with", // phase c committed with the completion
      "commit",
    ]);
  });

  it("takeover costs one extra statement over a fresh claim", async () => {
    const engine = createEngine({ db, leaseMs: 60_000 });
    setFaultHook(engine, (p) => {
      if (p === "after:phase:a") throw new CrashSignal(p);
    });
    await engine.runOnce(threeItems, { tenantId: "rt", key: "take", input: {} }).catch(() => undefined);
    setFaultHook(engine, undefined);
    await engine.release("rt", "take");
    expect(await measure(() => engine.runOnce(threeItems, { tenantId: "rt", key: "take", input: {} }))).toEqual([
      "with", // claim sees the expired lease
      "update", // takeover
      "with",
      "with",
      "begin",
      "set", // lock_timeout
      "with",
      "commit",
    ]);
  });

  it("a sleep suspends in one statement; a wait for a signal in one short transaction", async () => {
    const engine = createEngine({ db });
    const sleeper = workflow("rt_sleep")
      .sleep("nap", 60_000)
      .respond(() => ({ status: 200, body: null }));
    expect(await measure(() => engine.runOnce(sleeper, { tenantId: "rt", key: "nap", input: {} }))).toEqual([
      "with", // claim
      "with", // suspension: wake-up time, recovery point, history, NOTIFY
    ]);
    const waiter = workflow("rt_wait")
      .waitFor("confirmed")
      .respond(() => ({ status: 200, body: null }));
    expect(await measure(() => engine.runOnce(waiter, { tenantId: "rt", key: "wait", input: {} }))).toEqual([
      "with", // claim
      "begin",
      "select", // lock the run's row first (the signal does the same)
      "with", // no signal yet: suspend
      "commit",
    ]);
    // A suspended run answers a retry like a live lease: one read-only statement.
    expect(await measure(() => engine.runOnce(waiter, { tenantId: "rt", key: "wait", input: {} }))).toEqual(["with"]);
    expect(await measure(() => engine.signal("rt", "wait", "confirmed", { ok: true }))).toEqual([
      "begin",
      "select", // lock the run's row
      "with", // keep the signal, make the run due, NOTIFY
      "commit",
    ]);
  });

  it("invalid input and invalid keys send no SQL at all", async () => {
    const engine = createEngine({ db });
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "", input: {} }))).toEqual([]);
    expect(
      await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "k", input: { n: 10n } as never })),
    ).toEqual([]);
  });
});
