/**
 * Fault of the kind "wrong errors": on a database that was never migrated,
 * `runOnce` said "run engine.migrate()", but `signal`, `wait` and every
 * other entry point gave a raw `42P01 relation "....runs" does not exist`,
 * and the worker and the relay reported that raw error round after round.
 * Every entry point gives the same typed error as `runOnce`, and a
 * background loop reports it once per outage through `onError`.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, WorkflowUsageError, workflow } from "../src/index.ts";
import type { TestDb } from "./support/db.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 6 });
/** A Kysely whose pool counts checkouts: each round of a loop takes at least one connection. */
const counted = { db: undefined as unknown as TestDb, checkouts: 0 };
beforeAll(() => {
  const pool = new pg.Pool({ connectionString: t.url, max: 4 });
  pool.on("error", () => undefined);
  pool.on("acquire", () => {
    counted.checkouts++;
  });
  counted.db = new Kysely({ dialect: new PostgresDialect({ pool }) });
});
afterAll(async () => {
  await counted.db?.destroy();
});
const PATIENCE_MS = 60_000;
const wf = workflow("unmigrated_calls")
  .waitFor("go")
  .respond(() => ({ status: 200, body: null }));

const sched = workflow("unmigrated_schedule")
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

function expectMigrateHint(error: unknown, call: string): void {
  expect(error, call).toBeInstanceOf(WorkflowUsageError);
  expect((error as Error).message, call).toMatch(
    new RegExp(`missing in schema 'not_migrated_\\w+': run engine.migrate\\(\\) .* before ${call}`),
  );
}

const settle = (p: Promise<unknown>) =>
  p.then(
    () => new Error("resolved"),
    (e: unknown) => e,
  );

describe("entry points on a database that was never migrated", () => {
  it("every call names engine.migrate(), as runOnce does", async () => {
    const engine = createEngine({ db: t.db, schema: "not_migrated_calls" });
    const calls: [string, () => Promise<unknown>][] = [
      ["runOnce", () => engine.runOnce(wf, { tenantId: "t", key: "k", input: {} })],
      ["enqueue", () => engine.enqueue(t.db, wf, { tenantId: "t", key: "k", input: {} })],
      ["signal", () => engine.signal("t", "k", "go", {})],
      ["wait", () => engine.wait("t", "k", { timeoutMs: 0 })],
      ["inspect", () => engine.inspect("t", "k")],
      ["listKeys", () => engine.listKeys()],
      ["resumeStale", () => engine.resumeStale({ workflows: [wf] })],
      ["sweep", () => engine.sweep()],
      ["cancel", () => engine.cancel("t", "k")],
      ["retryFrom", () => engine.retryFrom("t", "k", "go")],
      ["unpark", () => engine.unpark("t", "k")],
      ["release", () => engine.release("t", "k")],
      ["forget", () => engine.forget("t", "k")],
      ["stats", () => engine.stats()],
      ["listOutbox", () => engine.listOutbox()],
      ["retryOutbox", () => engine.retryOutbox("t", "m")],
      ["schedule", () => engine.schedule("s", { cron: "0 * * * *", workflow: sched, tenantId: "t" })],
      ["unschedule", () => engine.unschedule("s")],
      ["listSchedules", () => engine.listSchedules()],
      ["pauseSchedule", () => engine.pauseSchedule("s")],
      ["resumeSchedule", () => engine.resumeSchedule("s")],
      ["listScheduleTicks", () => engine.listScheduleTicks()],
      ["overview", () => engine.overview()],
    ];
    for (const [call, fn] of calls) expectMigrateHint(await settle(fn()), call);
  });
});

/** Run a loop with an `onError` that collects, until it reported once and took `more` connections since. */
async function collect(
  start: (onError: (e: unknown) => void) => { stop(): Promise<void> },
  more: number,
): Promise<{ errors: unknown[]; stop(): Promise<void> }> {
  const errors: unknown[] = [];
  const loop = start((e) => errors.push(e));
  onTestFinished(() => loop.stop());
  await waitFor(async () => (errors.length > 0 ? true : undefined), PATIENCE_MS, 10);
  await moreRounds(more);
  return { errors, stop: () => loop.stop() };
}

async function moreRounds(more: number): Promise<void> {
  const seen = counted.checkouts;
  await waitFor(async () => (counted.checkouts >= seen + more ? true : undefined), PATIENCE_MS, 10);
}

const quick = workflow("unmigrated_worker")
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

async function migrateAndWaitForRun(engine: Engine, key: string): Promise<void> {
  await engine.migrate();
  await engine.enqueue(counted.db, quick, { tenantId: "t", key, input: {} });
  await waitFor(
    async () => ((await engine.inspect("t", key))?.status === "completed" ? true : undefined),
    PATIENCE_MS,
    20,
  );
}

describe("background loops on a database that was never migrated", () => {
  it("a worker reports the typed error once per outage, not a raw error every round", async () => {
    const engine = createEngine({ db: counted.db, schema: "not_migrated_worker" });
    const { errors, stop } = await collect(
      (onError) => engine.startWorker({ workflows: [quick], intervalMs: 5, onError }),
      30,
    );
    expect(errors).toHaveLength(1);
    expectMigrateHint(errors[0], "startWorker");
    // The schema appears: a round succeeds (a run is taken), which ends the outage.
    await migrateAndWaitForRun(engine, "w1");
    await sql`DROP SCHEMA not_migrated_worker CASCADE`.execute(t.db);
    await waitFor(async () => (errors.length > 1 ? true : undefined), PATIENCE_MS, 10);
    await moreRounds(30);
    expect(errors).toHaveLength(2);
    expectMigrateHint(errors[1], "startWorker");
    await stop();
  });

  it("a relay reports the typed error once per outage", async () => {
    const engine = createEngine({ db: counted.db, schema: "not_migrated_relay" });
    const { errors, stop } = await collect(
      (onError) => engine.startRelay({ handlers: { "receipt.email": () => {} }, pollIntervalMs: 5, onError }),
      30,
    );
    expect(errors).toHaveLength(1);
    expectMigrateHint(errors[0], "startRelay");
    await stop();
  });
});
