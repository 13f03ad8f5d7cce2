/**
 * Fault kind "half-open LISTEN connection": a connection that stops
 * answering without an error (a network black hole, not a reset) must be
 * noticed, reported once, replaced by polling, and, with a pool as the
 * `listen` source, re-established once the database answers again; and
 * every `stop()` must return whatever the connections do. The black hole is
 * a real one: a loopback TCP proxy that stops forwarding while keeping its
 * sockets open. Verdicts count deliveries and rounds (with polling so slow
 * that only a NOTIFY can explain a delivery), never the clock.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import type { LogFields } from "../src/index.ts";
import { createEngine, ListenConnectionLostError, workflow } from "../src/index.ts";
import type { BlackHoleProxy } from "./support/black-hole-proxy.ts";
import { startBlackHoleProxy } from "./support/black-hole-proxy.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
/** Generous: a loaded machine makes this slower, never red. */
const PATIENCE_MS = 120_000;
/** Polling so slow that no test here can see a poll round: only a NOTIFY (or a wake-up it counts) explains one. */
const NEVER_MS = 3_600_000;

const until = async (check: () => boolean | Promise<boolean>, what: string) => {
  await expect.poll(check, { timeout: PATIENCE_MS, interval: 20, message: what }).toBe(true);
};

async function proxy(): Promise<BlackHoleProxy> {
  const p = await startBlackHoleProxy(t.url);
  onTestFinished(() => p.close());
  return p;
}

function pool(url: string, max = 2, application_name?: string): pg.Pool {
  const p = new pg.Pool({ connectionString: url, max, ...(application_name ? { application_name } : {}) });
  // The README's two listeners: a cut connection must not crash the test process.
  p.on("error", () => undefined);
  p.on("connect", (client) => client.on("error", () => undefined));
  onTestFinished(() => p.end().catch(() => undefined));
  return p;
}

/** A Kysely on its own pool that counts the statements whose text contains `marker` (one per loop round). */
function countingDb(url: string, marker: string): { db: Kysely<unknown>; rounds: () => number; pool: pg.Pool } {
  let rounds = 0;
  const p = pool(url, 4);
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: p }),
    log: (event) => {
      if (String(event.query.sql).includes(marker)) rounds++;
    },
  });
  return { db, rounds: () => rounds, pool: p };
}

/** Records what the engine logs, and the round count when LISTEN came back. */
function recorder(rounds: () => number) {
  const lines: Array<{ message: string; fields: LogFields; rounds: number }> = [];
  const push = (fields: LogFields, message: string) => lines.push({ message, fields, rounds: rounds() });
  return { logger: { debug: push, info: push, warn: push, error: push }, lines };
}

const backAgain = <T extends { message: string }>(lines: T[]) =>
  lines.filter((l) => /LISTEN re-established/.test(l.message));

/** The idle LISTEN connections' name, so a test finds them (after the LISTEN, their last query is the check). */
const LISTENER = "idempo_listen_test";

async function listeningBackends(): Promise<number[]> {
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND application_name = ${LISTENER}
      AND (query ILIKE 'LISTEN%' OR query = 'SELECT 1')`.execute(t.db);
  return rows.map((r) => r.pid);
}

const mailer = (name: string) =>
  workflow(name)
    .input(z.object({ n: z.number().int() }))
    .phase("send", async ({ input, outbox }) => {
      await outbox.enqueue(`${name}.mail`, { n: input.n });
      return { n: input.n };
    })
    .respond(({ state }) => ({ status: 201, body: state }));

const listenErrors = (errors: unknown[]) => errors.filter((e) => e instanceof ListenConnectionLostError);

describe("a half-open LISTEN connection (network black hole)", () => {
  it("the relay reports a black-holed listen client once, destroys it, and delivers by polling", async () => {
    const p = await proxy();
    const listener = new pg.Client({ connectionString: p.url, application_name: LISTENER });
    await listener.connect();
    onTestFinished(() => listener.end().catch(() => undefined));
    const engine = createEngine({ db: t.db });
    const wf = mailer("ho_poll");
    const seen: number[] = [];
    const errors: unknown[] = [];
    const relay = engine.startRelay({
      handlers: { "ho_poll.mail": (m) => void seen.push((m.payload as { n: number }).n) },
      listen: listener,
      pollIntervalMs: 50,
      listenCheckMs: 50,
      answerTimeoutMs: 200,
      onError: (e) => errors.push(e),
    });
    onTestFinished(() => relay.stop());
    await until(async () => (await listeningBackends()).length === 1, "the relay listens");

    p.blackHole();
    await until(() => listenErrors(errors).length > 0, "the stalled LISTEN connection is reported");
    const [lost] = listenErrors(errors) as ListenConnectionLostError[];
    expect(lost?.code).toBe("listen_connection_lost");
    expect(lost?.message).toMatch(/stopped answering/);
    expect(lost?.message).toMatch(/polling/);

    // Messages enqueued afterwards still arrive, one round of polling after another.
    for (const n of [1, 2, 3]) {
      await engine.runOnce(wf, { tenantId: "t", key: `poll${n}`, input: { n } });
      await until(() => seen.includes(n), `message ${n} is delivered by polling`);
    }
    // Many checks and rounds later: still reported once.
    expect(listenErrors(errors)).toHaveLength(1);
    // Its socket was destroyed: the client ended, nothing waits on it.
    await until(() => socketDestroyed(listener), "the black-holed client's socket is destroyed");
  }, 180_000);

  it("a pool as the relay's listen source gets LISTEN back after the black hole, and a NOTIFY wakes it again", async () => {
    const p = await proxy();
    const counted = countingDb(t.url, "FOR UPDATE SKIP LOCKED");
    const rec = recorder(counted.rounds);
    const engine = createEngine({ db: counted.db, logger: rec.logger });
    const wf = mailer("ho_back");
    const seen: number[] = [];
    const errors: unknown[] = [];
    const relay = engine.startRelay({
      handlers: { "ho_back.mail": (m) => void seen.push((m.payload as { n: number }).n) },
      listen: pool(p.url, 1, LISTENER),
      pollIntervalMs: NEVER_MS,
      listenCheckMs: 50,
      answerTimeoutMs: 200,
      onError: (e) => errors.push(e),
    });
    onTestFinished(() => relay.stop());
    await until(async () => (await listeningBackends()).length === 1, "the relay listens");
    const send = (n: number) => engine.runOnce(wf, { tenantId: "t", key: `back${n}`, input: { n } });

    // Baseline: with polling this slow, only the NOTIFY delivers.
    await send(1);
    await until(() => seen.includes(1), "message 1 is delivered on NOTIFY");

    p.blackHole();
    await until(() => listenErrors(errors).length > 0, "the stalled LISTEN connection is reported");
    p.resume();
    await until(() => backAgain(rec.lines).length > 0, "LISTEN is re-established");
    // The look that LISTEN's return triggers (notifications may have been missed meanwhile) has been made...
    const atRecovery = backAgain(rec.lines)[0]?.rounds ?? 0;
    await until(() => counted.rounds() > atRecovery, "the catch-up round after the recovery");
    // ...so a message enqueued now can only be delivered because its NOTIFY woke the relay.
    const before = counted.rounds();
    await send(2);
    await until(() => seen.includes(2), "message 2 is delivered on NOTIFY after the recovery");
    expect(counted.rounds()).toBeGreaterThan(before);
    expect(listenErrors(errors)).toHaveLength(1);
    expect(backAgain(rec.lines)).toHaveLength(1);
    expect(await listeningBackends()).toHaveLength(1);
  }, 180_000);

  it("relay.stop() and worker.stop() return while the proxy black-holes every connection", async () => {
    const p = await proxy();
    const through = pool(p.url, 4);
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: through }) });
    const engine = createEngine({ db });
    const wf = mailer("ho_stop");
    const listenRelay = new pg.Client({ connectionString: p.url, application_name: LISTENER });
    await listenRelay.connect();
    const listenWorker = new pg.Client({ connectionString: p.url, application_name: LISTENER });
    await listenWorker.connect();
    const errors: unknown[] = [];
    const relay = engine.startRelay({
      handlers: { "ho_stop.mail": () => undefined },
      listen: listenRelay,
      pollIntervalMs: 20,
      answerTimeoutMs: 500,
      onError: (e) => errors.push(e),
    });
    const worker = engine.startWorker({
      workflows: [wf],
      listen: listenWorker,
      intervalMs: 20,
      sweep: false,
      answerTimeoutMs: 500,
      onError: (e) => errors.push(e),
    });
    await until(async () => (await listeningBackends()).length === 2, "both listen");

    p.blackHole();
    // The loops' rounds wait in the black hole: a round sent after it began
    // on its query, a round sent just before on its answer (counting only
    // queries waited for ever when both loops were caught mid-round).
    await until(() => p.heldChunks >= 3, "queries or their answers are stuck in the black hole");
    await Promise.all([relay.stop(), worker.stop()]);
    // Closing the proxy resets what is left, so the pools and clients can end.
    await p.close();
    await Promise.all([listenRelay.end().catch(() => undefined), listenWorker.end().catch(() => undefined)]);
  }, 120_000);

  it("a worker whose pooled listen client is terminated gets LISTEN back, and a NOTIFY wakes it again", async () => {
    const counted = countingDb(t.url, "PARTITION BY tenant_id");
    const rec = recorder(counted.rounds);
    const engine = createEngine({ db: counted.db, logger: rec.logger });
    const wf = workflow("ho_worker")
      .input(z.object({ n: z.number().int() }))
      .phase("a", ({ input }) => ({ n: input.n }))
      .respond(({ state }) => ({ status: 201, body: state }));
    const errors: unknown[] = [];
    const worker = engine.startWorker({
      workflows: [wf],
      listen: pool(t.url, 1, LISTENER),
      intervalMs: NEVER_MS,
      sweep: false,
      listenCheckMs: 50,
      answerTimeoutMs: 1_000,
      onError: (e) => errors.push(e),
    });
    onTestFinished(() => worker.stop());
    const completed = async (key: string) => (await engine.inspect("t", key))?.status === "completed";
    const enqueue = (n: number) => engine.enqueue(counted.db, wf, { tenantId: "t", key: `w${n}`, input: { n } });

    await until(async () => (await listeningBackends()).length === 1, "the worker listens");
    const [pid] = await listeningBackends();
    await enqueue(1);
    await until(() => completed("w1"), "run 1 runs on NOTIFY");

    await sql`SELECT pg_terminate_backend(${pid})`.execute(t.db);
    await until(() => listenErrors(errors).length > 0, "the lost LISTEN connection is reported");
    await until(() => backAgain(rec.lines).length > 0, "LISTEN is re-established");
    const atRecovery = backAgain(rec.lines)[0]?.rounds ?? 0;
    await until(() => counted.rounds() > atRecovery, "the catch-up round after the recovery");
    const now = await listeningBackends();
    expect(now).toHaveLength(1);
    expect(now).not.toContain(pid);

    await enqueue(2);
    await until(() => completed("w2"), "run 2 runs on NOTIFY after the recovery");
    expect(listenErrors(errors)).toHaveLength(1);
    expect(backAgain(rec.lines)).toHaveLength(1);
  }, 180_000);
});

function socketDestroyed(client: pg.Client): boolean {
  const stream = (client as unknown as { connection?: { stream?: { destroyed?: boolean } } }).connection?.stream;
  return stream?.destroyed === true;
}
