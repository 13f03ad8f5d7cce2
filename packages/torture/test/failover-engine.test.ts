/**
 * What the engine does across a failover, one behaviour per test, on a
 * two-node Patroni cluster (synchronous mode) behind HAProxy:
 *
 * - a worker's and a relay's LISTEN connection is lost with the primary,
 *   reported, and taken again on the new primary: a run enqueued after the
 *   failover is executed and its message delivered although both loops
 *   poll only every ten minutes;
 * - an `engine.wait` caller and a `runOnce` holding `waitInFlightMs` for a
 *   run whose step was in flight during the kill both get its answer;
 * - nothing acknowledged (a 202, an enqueue's `created`, a signal's answer)
 *   is missing on the new primary;
 * - a pool that reaches a standby gets 25006 for every write: the claim is
 *   sent again (within `unavailableRetryMs`) and goes through once the
 *   standby is promoted by a switchover; with the bound at 0 it is
 *   DatabaseUnavailableError at once.
 *
 * Runs only with IDEMPO_FAILOVER=1 (it installs Patroni, etcd and HAProxy
 * with apt-get when they are missing; about two minutes); skipped, saying
 * why, when the cluster cannot be had. Its ports start at 15490.
 */
import type { Engine, Logger } from "@idempo/core";
import { createEngine, DatabaseUnavailableError, ListenConnectionLostError, workflow } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClusterUp } from "../src/failover/cluster.ts";
import { clusterDown, clusterUp, testBed } from "../src/failover/cluster.ts";

const ENABLED = process.env.IDEMPO_FAILOVER === "1";
process.env.IDEMPO_FAILOVER_PORT = "15490";
/** A tenant of its own per run: a cluster left up by an interrupted run still holds the last one's keys. */
const T = `fo-${Date.now().toString(36)}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let up: ClusterUp | undefined;
const pools: pg.Pool[] = [];

function openPool(url: string, max = 8): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 2_000, keepAlive: true });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => client.on("error", () => undefined));
  pools.push(pool);
  return pool;
}
const kysely = (pool: pg.Pool) => new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });

/** Messages the engine logged, for the LISTEN-back lines. */
const logged: string[] = [];
const logger: Logger = {
  debug: (_f, m) => logged.push(m),
  info: (_f, m) => logged.push(m),
  warn: (_f, m) => logged.push(m),
  error: (_f, m) => logged.push(m),
};

/** Until `check` holds (polled), or `ms` passes: only a hang reaches it. */
async function until(check: () => Promise<boolean> | boolean, ms = 120_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(100);
  }
  return false;
}

/** Kill the primary from a settled cluster; resolves once the kill is sent. */
async function killPrimary(): Promise<string> {
  await testBed.settle();
  return testBed.killPrimary();
}

/** Run `work` until it does not throw (the front routes to the new primary within seconds). */
async function persistently<R>(work: () => Promise<R>): Promise<R> {
  for (let tries = 0; ; tries++) {
    try {
      return await work();
    } catch (error) {
      if (tries > 200) throw error;
      await sleep(200);
    }
  }
}

const delivered = new Set<string>();
const notifying = workflow("fo_notify")
  .phase("send", async ({ outbox, key }) => {
    await outbox.enqueue("fo.sent", { key });
    return { sent: true };
  })
  .respond(() => ({ status: 201, body: { sent: true } }));

let gateOpen: () => void = () => undefined;
const gate = new Promise<void>((resolve) => {
  gateOpen = resolve;
});
const gated = workflow("fo_gated", { leaseMs: 2_000 })
  .step("slow", async () => {
    await gate;
    return { slow: "done" };
  })
  .phase("record", () => ({ recorded: true }))
  .respond(({ state }) => ({ status: 201, body: { slow: state.slow, recorded: state.recorded } }));

const waiting = workflow("fo_waiting")
  .waitFor("go")
  .respond(() => ({ status: 201, body: { went: true } }));

describe.skipIf(!ENABLED)("the engine across a failover (IDEMPO_FAILOVER=1)", () => {
  let url = "";
  let engine: Engine;
  /** The application's own database handle, for its transactions. */
  let appDb: Kysely<unknown>;
  beforeAll(async () => {
    up = clusterUp();
    if ("unavailable" in up) return;
    url = up.url;
    appDb = kysely(openPool(url));
    engine = createEngine({ db: appDb, leaseMs: 2_000, listen: openPool(url, 1), logger });
    await engine.migrate();
  }, 600_000);
  afterAll(async () => {
    // A pool ends once its clients are back; the engine's LISTEN client is never given back.
    await Promise.race([Promise.all(pools.map((p) => p.end())), sleep(5_000)]);
    if (up && "url" in up) clusterDown();
  }, 120_000);

  const skipUnless = (ctx: { skip(note?: string): void }) => {
    if (!up || "unavailable" in up)
      ctx.skip(`the failover cluster cannot be had here: ${up && "unavailable" in up ? up.unavailable : ""}`);
  };

  it("a worker and a relay LISTEN again on the new primary: work enqueued after the failover runs without polling", async (ctx) => {
    skipUnless(ctx);
    const errors: unknown[] = [];
    const listen = openPool(url, 2);
    const poll = 600_000;
    const worker = engine.startWorker({
      workflows: [notifying],
      listen,
      intervalMs: poll,
      onError: (e) => errors.push(e),
    });
    const relay = engine.startRelay({
      handlers: { "fo.sent": async (m) => void delivered.add(String((m.payload as { key: string }).key)) },
      listen,
      pollIntervalMs: poll,
      onError: (e) => errors.push(e),
    });
    try {
      const enqueue = (key: string) =>
        persistently(() =>
          appDb.transaction().execute((tx) => engine.enqueue(tx, notifying, { tenantId: T, key, input: {} })),
        );
      await enqueue("before");
      expect(await until(() => delivered.has("before"))).toBe(true);

      await killPrimary();
      // Both loops saw their LISTEN connection go, and took a new one on the new primary.
      expect(await until(() => errors.filter((e) => e instanceof ListenConnectionLostError).length >= 2)).toBe(true);
      expect(await until(() => logged.some((m) => m.includes("worker LISTEN re-established")))).toBe(true);
      expect(await until(() => logged.some((m) => m.includes("relay LISTEN re-established")))).toBe(true);

      await enqueue("after");
      expect(await until(() => delivered.has("after"))).toBe(true);
      expect((await engine.inspect(T, "after"))?.status).toBe("completed");
    } finally {
      await Promise.all([worker.stop(), relay.stop()]);
    }
  }, 300_000);

  it("an engine.wait caller and a waitInFlightMs holder get the answer of a run that was in flight at the kill", async (ctx) => {
    skipUnless(ctx);
    const first = engine.runOnce(gated, { tenantId: T, key: "w1", input: {} }).catch((e: unknown) => e);
    expect(await until(async () => (await engine.inspect(T, "w1"))?.status === "in_flight")).toBe(true);
    const other = createEngine({ db: kysely(openPool(url)), leaseMs: 2_000 });
    const waiter = engine.wait(T, "w1", { timeoutMs: 240_000 });
    const holder = other.runOnce(gated, { tenantId: T, key: "w1", input: {}, waitInFlightMs: 240_000 });

    await killPrimary();
    gateOpen();
    const [waited, held, own] = await Promise.all([waiter, holder, first]);
    const answer = { slow: "done", recorded: true };
    expect(waited).toMatchObject({ status: 201, body: answer });
    expect(held).toMatchObject({ status: 201, body: answer });
    // The attempt that was cut off either finished too, or was told the database failed it.
    if (own instanceof Error) expect(own).toBeInstanceOf(DatabaseUnavailableError);
    else expect(own).toMatchObject({ status: 201, body: answer });
  }, 300_000);

  it("nothing acknowledged (a 202, an enqueue's created, a signal's answer) is missing on the new primary", async (ctx) => {
    skipUnless(ctx);
    const db = appDb;
    const acked = { suspended: [] as string[], created: [] as string[], signalled: [] as string[] };
    let acks = 0;
    let errors = 0;
    let killed = false;
    const OPS = 60;
    const caller = async (lane: number) => {
      for (let i = 0; i < OPS; i++) {
        const key = `a-${lane}-${i}`;
        try {
          if (i % 3 === 0) {
            const res = await engine.runOnce(waiting, { tenantId: T, key, input: {} });
            if (res.status === 202) acked.suspended.push(key);
          } else if (i % 3 === 1) {
            const res = await db
              .transaction()
              .execute((tx) => engine.enqueue(tx, waiting, { tenantId: T, key, input: {} }));
            if (res.created) acked.created.push(key);
          } else {
            const target = acked.suspended[acked.suspended.length - 1];
            if (target === undefined) continue;
            await engine.signal(T, target, "go", { by: key });
            acked.signalled.push(target);
          }
          if (++acks === 30 && !killed) {
            killed = true;
            void testBed.killPrimary();
          }
        } catch {
          errors++;
          await sleep(100);
        }
      }
    };
    await testBed.settle();
    await Promise.all([0, 1, 2].map(caller));
    expect(killed).toBe(true);
    console.log(
      `acknowledged: ${acked.suspended.length} 202s, ${acked.created.length} created, ${acked.signalled.length} signals; ${errors} errors`,
    );

    await testBed.settle();
    const check = new pg.Client({ connectionString: await testBed.leaderUrl("postgres") });
    await check.connect();
    try {
      const runs = new Set(
        (await check.query<{ key: string }>("SELECT key FROM idempo.runs WHERE tenant_id = $1", [T])).rows.map(
          (r) => r.key,
        ),
      );
      const signals = new Set(
        (
          await check.query<{ key: string }>("SELECT key FROM idempo.signals WHERE tenant_id = $1 AND name = 'go'", [T])
        ).rows.map((r) => r.key),
      );
      expect([...acked.suspended, ...acked.created].filter((k) => !runs.has(k))).toEqual([]);
      expect(acked.signalled.filter((k) => !signals.has(k))).toEqual([]);
    } finally {
      await check.end();
    }
  }, 300_000);

  it("a claim on a standby is sent again until a switchover promotes it; with unavailableRetryMs 0 it is refused at once", async (ctx) => {
    skipUnless(ctx);
    await testBed.settle();
    const leader = new URL(await testBed.leaderUrl("postgres"));
    const standbyPort = leader.port === "15491" ? "15492" : "15491";
    const standby = new URL(leader);
    standby.port = standbyPort;
    const onStandby = createEngine({ db: kysely(openPool(standby.toString())), unavailableRetryMs: 120_000 });
    const claim = onStandby.runOnce(notifying, { tenantId: T, key: "s1", input: {} });
    await sleep(500);
    await testBed.switchover();
    expect(await claim).toMatchObject({ status: 201, replayed: false });

    // The old leader is the standby now: refused at once when the engine is told not to wait.
    await testBed.settle();
    const refusing = createEngine({ db: kysely(openPool(leader.toString())), unavailableRetryMs: 0 });
    const err = await refusing.runOnce(notifying, { tenantId: T, key: "s2", input: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect(((err as Error).cause as { code?: string }).code).toBe("25006");
  }, 300_000);
});
