/**
 * Fault of the kind "options that break the lease are accepted": a lease
 * whose heartbeat interval overflows Node's timer limit (so it renews every
 * millisecond), a heartbeat slower than the lease (so a live run is taken
 * over), negative batch sizes that reach PostgreSQL, filters that silently
 * match nothing, and a schema that fails only at the first call. Each is
 * refused up front with a typed error naming the option and its range.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine, InvalidOptionError, WorkflowDefinitionError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const wf = workflow("opts")
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

function refused(fn: () => unknown, option: string, message: RegExp): void {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error, option).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  expect((error as Error).message).toMatch(message);
}

async function refusedAsync(fn: () => Promise<unknown>, option: string, message: RegExp): Promise<void> {
  const error = await fn().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, option).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  expect((error as Error).message).toMatch(message);
}

describe("engine options", () => {
  it("a lease beyond Node's timer limit is refused (its heartbeat would fire every millisecond)", () => {
    refused(
      () => createEngine({ db: t.db, leaseMs: 7_000_000_000 }),
      "leaseMs",
      /createEngine: leaseMs must be an integer from 1 to 2,147,483,647, got 7000000000/,
    );
  });

  it("a heartbeat slower than half the lease is refused, at the engine and for a workflow's own lease", async () => {
    refused(() => createEngine({ db: t.db, leaseMs: 1000, heartbeatMs: 60_000 }), "heartbeatMs", /at most half/);
    const engine = createEngine({ db: t.db, heartbeatMs: 800 });
    const short = workflow("short_lease", { leaseMs: 1000 })
      .phase("p", () => ({}))
      .respond(() => ({ status: 200, body: null }));
    await refusedAsync(
      () => engine.runOnce(short, { tenantId: "t1", key: "hb", input: {} }),
      "heartbeatMs",
      /workflow 'short_lease': heartbeatMs \(800\)/,
    );
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs`.execute(t.db);
    expect(rows[0]?.n).toBe(0);
  });

  it("zero, negative, fractional and non-number durations are refused", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, "1000" as never]) {
      refused(() => createEngine({ db: t.db, retentionMs: bad }), "retentionMs", /retentionMs must be an integer/);
      refused(() => createEngine({ db: t.db, attemptTimeoutMs: bad }), "attemptTimeoutMs", /attemptTimeoutMs/);
    }
  });
});

describe("call options", () => {
  const engine = createEngine({ db: t.db });

  it("sweep({ batchSize: -1 }) is refused before any SQL (not 'LIMIT must not be negative')", async () => {
    await refusedAsync(
      () => engine.sweep({ batchSize: -1 }),
      "batchSize",
      /sweep: batchSize must be an integer from 1/,
    );
    await refusedAsync(() => engine.sweep({ maxBatches: 0 }), "maxBatches", /maxBatches/);
  });

  it("resumeStale with no workflows, something that is not a workflow, or limit 0 is refused instead of returning nothing", async () => {
    await refusedAsync(
      () => engine.resumeStale({ workflows: [{}] as never }),
      "workflows",
      /workflows\[0\] is not a workflow/,
    );
    await refusedAsync(() => engine.resumeStale({ workflows: [] }), "workflows", /non-empty array/);
    await refusedAsync(() => engine.resumeStale({ workflows: [wf], limit: 0 }), "limit", /resumeStale: limit must be/);
  });

  it("startWorker and startRelay check their options when started", () => {
    refused(() => engine.startWorker({ workflows: [wf], intervalMs: 0 }), "intervalMs", /startWorker: intervalMs/);
    refused(() => engine.startWorker({ workflows: [{}] as never }), "workflows", /workflows\[0\]/);
    refused(() => engine.startRelay({ handlers: {}, concurrency: 0 }), "concurrency", /startRelay: concurrency/);
    refused(() => engine.startRelay({ handlers: {}, pollIntervalMs: 2 ** 31 }), "pollIntervalMs", /2,147,483,647/);
  });
});

describe("workflow and step options", () => {
  it("step retries, backoff and timeout out of range are refused when the workflow is built", () => {
    refused(() => workflow("s").step("x", () => ({}), { retries: -1 }), "retries", /step 'x': retries/);
    refused(() => workflow("s").step("x", () => ({}), { timeoutMs: 2 ** 31 }), "timeoutMs", /timeoutMs/);
    refused(() => workflow("s").step("x", () => ({}), { backoffMs: -5 }), "backoffMs", /backoffMs/);
    refused(() => workflow("s").step("x", () => ({}), { retryable: true as never }), "retryable", /a function/);
    refused(() => workflow("s", { maxAttempts: 0 }), "maxAttempts", /maxAttempts must be an integer from 1 to 10,000/);
  });

  it("a schema that is not a zod schema fails when the workflow is built, not at the first call", () => {
    const notZod = { parse: (v: unknown) => v };
    expect(() => workflow("x").input(notZod as never)).toThrow(WorkflowDefinitionError);
    expect(() => workflow("x").input(notZod as never)).toThrow(/needs a zod schema/);
  });
});
