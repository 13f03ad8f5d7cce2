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
      statements.push(label(event.query.sql));
    },
  });
});

afterAll(() => db.destroy());

/**
 * One round trip as a word: the engine's statement function it calls
 * (`claim_new_key`), `BEGIN; SET` for a phase's begin with its lock_timeout in
 * the same message, or else the statement's first word.
 */
function label(text: string): string {
  const bare = text.replace(/^\s*\/\*.*?\*\/\s*/s, "").trim();
  const call = /^SELECT (?:\* FROM )?"idempo"\."([a-z_]+)"\(/.exec(bare);
  if (call?.[1]) return call[1];
  if (/^BEGIN; SET LOCAL lock_timeout = '\d+ms'$/.test(bare)) return "begin; set";
  return bare.split(/\s+/)[0]?.toLowerCase() ?? "";
}

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
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "new", input: {} }))).toEqual([
      "claim_new_key",
      "begin; set", // the phase's first statement begins it, with its lock_timeout, in one message
      "insert", // business write
      "commit_phase", // recovery point + completion + history
      "commit",
    ]);
  });

  it("replay and 409 are one read-only statement each", async () => {
    const engine = createEngine({ db, leaseMs: 60_000 });
    await engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: {} });
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: {} }))).toEqual([
      "claim_new_key",
    ]);
    setFaultHook(engine, (p) => {
      if (p === "before:phase:write") throw new CrashSignal(p);
    });
    await engine.runOnce(onePhase, { tenantId: "rt", key: "busy", input: {} }).catch(() => undefined);
    setFaultHook(engine, undefined);
    expect(await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "busy", input: {} }))).toEqual([
      "claim_new_key",
    ]);
    // A refused payload costs the same single statement.
    expect(
      await measure(() => engine.runOnce(onePhase, { tenantId: "rt", key: "replay", input: { other: 1 } })),
    ).toEqual(["claim_new_key"]);
  });

  it("phase / step / phase: one statement per boundary; phases that write nothing open no transaction", async () => {
    const engine = createEngine({ db });
    expect(await measure(() => engine.runOnce(threeItems, { tenantId: "rt", key: "three", input: {} }))).toEqual([
      "claim_new_key",
      "commit_phase", // phase a committed, in autocommit
      "record_step_started", // step b started
      "record_step_result", // step b recorded
      "commit_phase", // phase c committed with the completion, in autocommit
    ]);
  });

  it("a step retried in process records its tries with its result: no statement per try", async () => {
    const engine = createEngine({ db });
    let calls = 0;
    const flaky = workflow("rt_flaky")
      .phase("a", () => ({ a: 1 }))
      .step(
        "b",
        () => {
          if (++calls < 3) throw new Error("transient");
          return { b: calls };
        },
        { retries: 2, retryable: () => true, backoffMs: 1, maxBackoffMs: 1 },
      )
      .phase("c", () => ({ c: 3 }))
      .respond(({ state }) => ({ status: 201, body: state }));
    expect(await measure(() => engine.runOnce(flaky, { tenantId: "rt", key: "flaky", input: {} }))).toEqual([
      "claim_new_key",
      "commit_phase",
      "record_step_started",
      "record_step_result", // with the three tries
      "commit_phase",
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
      "claim_new_key", // sees the expired lease
      "take_over_expired_lease",
      "record_step_started",
      "record_step_result",
      "commit_phase",
    ]);
  });

  it("a sleep suspends in one statement; a wait for a signal in one short transaction", async () => {
    const engine = createEngine({ db });
    const sleeper = workflow("rt_sleep")
      .sleep("nap", 60_000)
      .respond(() => ({ status: 200, body: null }));
    expect(await measure(() => engine.runOnce(sleeper, { tenantId: "rt", key: "nap", input: {} }))).toEqual([
      "claim_new_key",
      "with", // suspension: wake-up time, recovery point, history, NOTIFY
    ]);
    const waiter = workflow("rt_wait")
      .waitFor("confirmed")
      .respond(() => ({ status: 200, body: null }));
    expect(await measure(() => engine.runOnce(waiter, { tenantId: "rt", key: "wait", input: {} }))).toEqual([
      "claim_new_key",
      "select", // read the wait before the lock: `accepted` runs on it, outside the transaction
      "begin", // the wait's own transaction (not a phase's): Kysely's BEGIN
      "select", // lock the run's row first (the signal does the same)
      "with", // no signal yet: suspend
      "commit",
    ]);
    // A suspended run answers a retry like a live lease: one read-only statement.
    expect(await measure(() => engine.runOnce(waiter, { tenantId: "rt", key: "wait", input: {} }))).toEqual([
      "claim_new_key",
    ]);
    expect(await measure(() => engine.signal("rt", "wait", "confirmed", { ok: true }))).toEqual([
      "begin",
      "select", // lock the run's row
      "with", // keep the signal, make the run due, NOTIFY
      "commit",
    ]);
  });

  it("a limit costs its own statement only: the slot of a .concurrency workflow, the token of a rateLimit step", async () => {
    // The paths above use neither and send what they sent before limits existed.
    const engine = createEngine({ db, rateLimits: { api: { perSecond: 1_000, burst: 10 } } });
    const limited = workflow("rt_limited")
      .concurrency({ key: ({ tenantId }) => tenantId, max: 4 })
      .phase("a", () => ({ a: 1 }))
      .step("b", () => ({ b: 2 }), { rateLimit: "api" })
      .phase("c", () => ({ c: 3 }))
      .respond(({ state }) => ({ status: 201, body: state }));
    expect(await measure(() => engine.runOnce(limited, { tenantId: "rt", key: "limited", input: {} }))).toEqual([
      "claim_new_key",
      "acquire_concurrency_slot", // the slot, before the first item
      "commit_phase",
      "take_rate_token", // the token, before the step starts
      "record_step_started",
      "record_step_result",
      "commit_phase",
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
