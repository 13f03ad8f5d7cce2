/**
 * Fault of the kind "misspelt options are accepted": `.waitFor("x", {
 * timeOutMs })` made a wait that never times out, silently;
 * `createEngine({ logger: "console" })` and `({ listen: {} })` were
 * accepted and failed (or did nothing) later; a number given as a string
 * was refused as "got 10". Every options object of every public API is
 * checked for unknown keys (`InvalidOptionError` naming the key and the
 * known ones) and for the type of each value, named with its type.
 */

import { sql } from "kysely";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, InvalidOptionError, withPreparedStatements, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const T = "strict";
const wf = workflow("strict_opts")
  .phase("p", () => ({}))
  .respond(() => ({ status: 200, body: null }));

function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** `fn` throws InvalidOptionError naming `option`, with a message matching each of `messages`. */
function refused(error: unknown, option: string, ...messages: RegExp[]): void {
  expect(error, option).toBeInstanceOf(InvalidOptionError);
  expect((error as InvalidOptionError).option).toBe(option);
  for (const m of messages) expect((error as Error).message).toMatch(m);
}

async function runs(key: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = ${T} AND key = ${key}`.execute(t.db);
  return rows[0]?.n ?? 0;
}

describe("createEngine", () => {
  it("an unknown option is refused, naming it, the one it resembles and every known one", () => {
    refused(
      caught(() => createEngine({ db: t.db, leaseMS: 1000 } as never)),
      "leaseMS",
      /^createEngine: unknown option 'leaseMS' \(did you mean 'leaseMs'\?\); the known options are /,
      /answerTimeoutMs, attemptTimeoutMs, db, heartbeatMs, leaseMs, listen, listenCheckMs, logger, maxPayloadBytes, preparedStatements, rateLimits, retentionMs, schema, unavailableRetryMs, workflows$/,
    );
  });

  it("values of the wrong type are named with their type", () => {
    refused(
      caught(() => createEngine({ db: t.db, logger: "console" as never })),
      "logger",
      /createEngine: logger must be a logger with debug, info, warn and error functions .*got the string "console"/,
    );
    refused(
      caught(() => createEngine({ db: t.db, listen: {} as never })),
      "listen",
      /listen must be .*got an object/,
    );
    refused(
      caught(() => createEngine({ db: t.db, workflows: wf as never })),
      "workflows",
      /got an object/,
    );
    refused(
      caught(() => createEngine({ db: t.db, leaseMs: "10" as never })),
      "leaseMs",
      /got the string "10"/,
    );
    refused(
      caught(() => createEngine({ db: t.db, schema: 5 as never })),
      "schema",
      /got the number 5/,
    );
    refused(
      caught(() => createEngine({ db: "postgres://" as never })),
      "db",
      /db must be a Kysely instance .*got the string/,
    );
    refused(
      caught(() => createEngine("db" as never)),
      "options",
      /options must be an object, got the string "db"/,
    );
  });

  it("the options a pg.Client and console give are accepted as they are", async () => {
    const client = new pg.Client({ connectionString: t.url });
    expect(() => createEngine({ db: t.db, logger: console, listen: client })).not.toThrow();
  });
});

describe("workflow builder", () => {
  it(".waitFor('x', { timeOutMs }) is refused at build time instead of waiting forever", () => {
    refused(
      caught(() => workflow("w").waitFor("x", { timeOutMs: 900_000 } as never)),
      "timeOutMs",
      /^workflow 'w', waitFor 'x': unknown option 'timeOutMs' \(did you mean 'timeoutMs'\?\); the known options are onTimeout, schema, timeoutMs$/,
    );
    refused(
      caught(() => workflow("w").waitFor("x", { timeoutMs: "60000" as never })),
      "timeoutMs",
      /got the string "60000"/,
    );
  });

  it("step and workflow options are checked the same way", () => {
    refused(
      caught(() => workflow("w").step("s", () => ({}), { retry: 3 } as never)),
      "retry",
      /workflow 'w', step 's': unknown option 'retry'; the known options are backoffMs, maxBackoffMs, rateLimit, reconcile, retries, retryable, timeoutMs$/,
    );
    refused(
      caught(() => workflow("w").step("s", () => ({}), { retries: "3" as never })),
      "retries",
      /got the string "3"/,
    );
    refused(
      caught(() => workflow("w", { retentionMS: 1 } as never)),
      "retentionMS",
      /did you mean 'retentionMs'/,
    );
    refused(
      caught(() => workflow("w", { maxAttempts: true as never })),
      "maxAttempts",
      /got the boolean true/,
    );
  });
});

describe("calls", () => {
  let engine: Engine;
  beforeAll(() => {
    engine = createEngine({ db: t.db });
  });

  it("runOnce: a misspelt request key or a wait given as a string is refused before anything is claimed", async () => {
    refused(
      await engine.runOnce(wf, { tenantId: T, key: "r1", input: {}, waitInflightMs: 10 } as never).catch((e) => e),
      "waitInflightMs",
      /runOnce: unknown option 'waitInflightMs' \(did you mean 'waitInFlightMs'\?\); the known options are input, key, tenantId, waitInFlightMs$/,
    );
    refused(
      await engine.runOnce(wf, { tenantId: T, key: "r2", input: {}, waitInFlightMs: "10" as never }).catch((e) => e),
      "waitInFlightMs",
      /runOnce: waitInFlightMs must be an integer, got the string "10"/,
    );
    expect(await runs("r1")).toBe(0);
    expect(await runs("r2")).toBe(0);
  });

  it("enqueue: a key that only runOnce knows is refused", async () => {
    refused(
      await engine.enqueue(t.db, wf, { tenantId: T, key: "e1", input: {}, waitInFlightMs: 5 } as never).catch((e) => e),
      "waitInFlightMs",
      /enqueue: unknown option 'waitInFlightMs'; the known options are input, key, priority, tenantId$/,
    );
    expect(await runs("e1")).toBe(0);
  });

  it("outbox.enqueue in a phase: a misspelt option is refused and the phase rolls back", async () => {
    const sends = workflow("strict_outbox")
      .phase("notify", async ({ outbox }) => {
        await outbox.enqueue("receipt.email", {}, { deliverykey: "d-1" } as never);
      })
      .respond(() => ({ status: 200, body: null }));
    refused(
      await engine.runOnce(sends, { tenantId: T, key: "o1", input: {} }).catch((e) => e),
      "deliverykey",
      /outbox.enqueue: unknown option 'deliverykey' \(did you mean 'deliveryKey'\?\)/,
    );
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.outbox WHERE key = 'o1'`.execute(
      t.db,
    );
    expect(rows[0]?.n).toBe(0);
  });

  it("wait", async () => {
    refused(
      await engine.wait(T, "w", { timeout: 10 } as never).catch((e) => e),
      "timeout",
      /wait: unknown option 'timeout'/,
    );
    refused(
      await engine.wait(T, "w", { timeoutMs: "10" as never }).catch((e) => e),
      "timeoutMs",
      /got the string "10"/,
    );
  });

  it("startWorker and startRelay refuse before they start", () => {
    refused(
      caught(() => engine.startWorker({ workflows: [wf], intervalMS: 10 } as never)),
      "intervalMS",
      /startWorker: unknown option 'intervalMS' \(did you mean 'intervalMs'\?\); the known options are answerTimeoutMs, concurrency, intervalMs, limit, listen, listenCheckMs, onError, schedules, sweep, workflowConcurrency, workflows$/,
    );
    refused(
      caught(() => engine.startWorker({ workflows: [wf], sweep: "no" as never })),
      "sweep",
      /got the string "no"/,
    );
    refused(
      caught(() => engine.startWorker({ workflows: [wf], onError: 1 as never })),
      "onError",
      /got the number 1/,
    );
    refused(
      caught(() => engine.startRelay({ handlers: {}, pollIntervalMS: 10 } as never)),
      "pollIntervalMS",
      /startRelay: unknown option 'pollIntervalMS' \(did you mean 'pollIntervalMs'\?\)/,
    );
    refused(
      caught(() => engine.startRelay({ handlers: { "receipt.email": "send" as never } })),
      "handlers.receipt.email",
      /handlers\.receipt\.email must be a function .*got the string "send"/,
    );
    refused(
      caught(() => engine.startRelay({ handlers: {}, listen: {} as never })),
      "listen",
      /got an object/,
    );
  });

  it("resumeStale, sweep, listKeys and listOutbox", async () => {
    refused(
      await engine.resumeStale({ workflows: [wf], limt: 1 } as never).catch((e) => e),
      "limt",
      /resumeStale: unknown option 'limt' \(did you mean 'limit'\?\); the known options are limit, workflows$/,
    );
    refused(await engine.sweep({ batchsize: 10 } as never).catch((e) => e), "batchsize", /did you mean 'batchSize'/);
    refused(await engine.sweep({ batchSize: "10" as never }).catch((e) => e), "batchSize", /got the string "10"/);
    const schedule = (o: Record<string, unknown>) =>
      engine.schedule("s", { cron: "0 * * * *", workflow: wf, tenantId: T, ...o } as never).catch((e) => e);
    refused(
      await schedule({ timeZone: "UTC" }),
      "timeZone",
      /schedule 's': unknown option 'timeZone' \(did you mean 'timezone'\?\)/,
    );
    refused(await schedule({ graceMs: "5" }), "graceMs", /got the string "5"/);
    refused(
      await engine.listKeys({ tenant: T } as never).catch((e) => e),
      "tenant",
      /listKeys: unknown option 'tenant'; the known options are cursor, limit, status, stuck, tenantId, workflow$/,
    );
    refused(await engine.listKeys({ stuck: "yes" as never }).catch((e) => e), "stuck", /got the string "yes"/);
    refused(await engine.listOutbox({ topics: "x" } as never).catch((e) => e), "topics", /did you mean 'topic'/);
  });

  it("signal: a misspelt option and a tx that is not a transaction are refused before anything is stored", async () => {
    refused(
      await engine.signal(T, "s1", "go", {}, { txn: {} } as never).catch((e) => e),
      "txn",
      /^signal: unknown option 'txn' \(did you mean 'tx'\?\); the known options are tx$/,
    );
    refused(
      await engine.signal(T, "s1", "go", {}, { tx: t.db as never }).catch((e) => e),
      "tx",
      /got an object|got a Kysely/,
    );
  });

  it("operator verbs: cancel, retryFrom and forget", async () => {
    refused(
      await engine.retryFrom(T, "c1", "p", { resend: true } as never).catch((e) => e),
      "resend",
      /retryFrom: unknown option 'resend'; the known options are resendOutbox$/,
    );
    refused(
      await engine.retryFrom(T, "c1", "p", { resendOutbox: "yes" as never }).catch((e) => e),
      "resendOutbox",
      /got the string "yes"/,
    );
    refused(
      await engine.cancel(T, "c1", { stauts: 400 } as never).catch((e) => e),
      "stauts",
      /cancel: unknown option 'stauts'; the known options are body, status$/,
    );
    refused(
      await engine.forget(T, "c1", { forced: true } as never).catch((e) => e),
      "forced",
      /forget: unknown option 'forced' \(did you mean 'force'\?\)/,
    );
    refused(await engine.forget(T, "c1", { force: "yes" as never }).catch((e) => e), "force", /got the string "yes"/);
  });

  it("withPreparedStatements", () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 1 });
    refused(
      caught(() => withPreparedStatements(pool, { onError: () => {} } as never)),
      "onError",
      /withPreparedStatements: unknown option 'onError'; the known options are onConnectionError$/,
    );
    refused(
      caught(() => withPreparedStatements(pool, { onConnectionError: "log" as never })),
      "onConnectionError",
      /got the string "log"/,
    );
  });
});
