/**
 * Field fault of the kind "relay and worker liveness (LISTEN/NOTIFY gaps,
 * reconnects, polling fallback)" (BR-29): a background loop must survive a
 * database outage. The relay's LISTEN session is terminated, then the
 * database refuses every connection (and every backend of it is
 * terminated) until each loop has failed a given number of rounds; after
 * that, runs and messages created after the outage are still processed,
 * and `stop()` returns. Counts of failed rounds decide when the outage
 * ends, never a clock.
 */
import { sql } from "kysely";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { createEngine, workflow } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 6 });
const ROUNDS_DOWN = 10;
/** Generous: a loaded machine makes this slower, never red. */
const PATIENCE_MS = 120_000;

function adminUrl(url: string): string {
  const u = new URL(url);
  u.pathname = "/postgres";
  return u.toString();
}

async function delivered(tenantId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.outbox WHERE tenant_id = ${tenantId} AND status = 'delivered'`.execute(t.db);
  return rows[0]?.n ?? 0;
}

async function listening(pid: number): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid} AND query ILIKE 'LISTEN%'`.execute(t.db);
  return (rows[0]?.n ?? 0) > 0;
}

describe("background loops after a database outage (BR-29)", () => {
  it("the relay (with a listen client) and the worker keep working after the LISTEN session is terminated and the database refused connections", async () => {
    const admin = new pg.Client({ connectionString: adminUrl(t.url) });
    await admin.connect();
    onTestFinished(async () => {
      await admin.query(`ALTER DATABASE "${t.name}" WITH ALLOW_CONNECTIONS true`);
      await admin.end();
    });
    const engine = createEngine({ db: t.db, leaseMs: 300 });
    const wf = workflow("br29_checkout")
      .input(z.object({ orderId: z.string() }))
      .phase("create_order", ({ input }) => ({ orderId: input.orderId }))
      .phase("record_charge", async ({ state, outbox }) => {
        await outbox.enqueue("receipt.email", { orderId: state.orderId });
        return {};
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    // A run that crashes after its first phase is stuck until the worker resumes it.
    setFaultHook(engine, (point, run) => {
      if (point === "after:phase:create_order" && run.key.startsWith("stuck") && run.attempt === 1)
        throw new CrashSignal(point);
    });
    onTestFinished(() => setFaultHook(engine, undefined));

    // The user's dedicated LISTEN client, with no 'error' listener of its own:
    // its backend's termination must not crash the process.
    const listener = new pg.Client({ connectionString: t.url });
    await listener.connect();
    onTestFinished(() => listener.end().catch(() => undefined));
    const relayErrors: unknown[] = [];
    const workerErrors: unknown[] = [];
    const seen: string[] = [];
    const relay = engine.startRelay({
      handlers: {
        "receipt.email": (m) => {
          seen.push(m.messageId);
        },
      },
      listen: listener,
      pollIntervalMs: 100,
      leaseMs: 1_000,
      onError: (e) => relayErrors.push(e),
    });
    const worker = engine.startWorker({
      workflows: [wf],
      intervalMs: 50,
      onError: (e) => workerErrors.push(e),
    });
    let stopped = false;
    onTestFinished(async () => {
      if (!stopped) await Promise.all([relay.stop(), worker.stop()]);
    });

    const run = (key: string) => engine.runOnce(wf, { tenantId: "o1", key, input: { orderId: `o-${key}` } });
    const stuck = async (key: string) => {
      await expect(run(key)).rejects.toBeInstanceOf(CrashSignal);
      await engine.release("o1", key);
    };

    // Baseline.
    const pid = (listener as unknown as { processID: number }).processID;
    await waitFor(async () => ((await listening(pid)) ? true : undefined), PATIENCE_MS, 20);
    await run("k1");
    await waitFor(async () => ((await delivered("o1")) === 1 ? true : undefined), PATIENCE_MS, 20);

    // 1. The LISTEN session is terminated: the relay hears of it, and k2's message still arrives.
    const before = relayErrors.length;
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    await waitFor(async () => (relayErrors.length > before ? true : undefined), PATIENCE_MS, 20);
    expect(relayErrors.slice(before).map(String).join("\n")).toMatch(/listen/i);
    await run("k2");
    await waitFor(async () => ((await delivered("o1")) === 2 ? true : undefined), PATIENCE_MS, 20);

    // A run stuck as the outage begins (its lease runs out during it, most likely): resumed after it.
    await expect(run("stuck0")).rejects.toBeInstanceOf(CrashSignal);

    // 2. The database refuses connections, and every backend of it is cut off, for ROUNDS_DOWN failed rounds of each loop.
    await admin.query(`ALTER DATABASE "${t.name}" WITH ALLOW_CONNECTIONS false`);
    await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
      [t.name],
    );
    const relayBefore = relayErrors.length;
    const workerBefore = workerErrors.length;
    await waitFor(
      async () =>
        relayErrors.length - relayBefore >= ROUNDS_DOWN && workerErrors.length - workerBefore >= ROUNDS_DOWN
          ? true
          : undefined,
      PATIENCE_MS,
      20,
    );
    await admin.query(`ALTER DATABASE "${t.name}" WITH ALLOW_CONNECTIONS true`);

    // 3. After the outage: a run left stuck is resumed by the worker, and every message is delivered.
    await waitFor(
      async () => {
        try {
          await sql`SELECT 1`.execute(t.db);
          return true;
        } catch {
          return undefined;
        }
      },
      PATIENCE_MS,
      50,
    );
    await stuck("stuck1");
    await run("k3");
    for (const key of ["stuck0", "stuck1"]) {
      await waitFor(
        async () => ((await engine.inspect("o1", key))?.status === "completed" ? true : undefined),
        PATIENCE_MS,
        20,
      );
    }
    await waitFor(async () => ((await delivered("o1")) === 5 ? true : undefined), PATIENCE_MS, 20);
    expect(new Set(seen).size).toBe(5);
    // What each loop reported during the outage: refused connections, round after round.
    expect(workerErrors.slice(workerBefore).map(String).join("\n")).toMatch(/not currently accepting connections/);
    expect(relayErrors.slice(relayBefore).map(String).join("\n")).toMatch(/not currently accepting connections/);

    // Both loops stop after the outage.
    await Promise.all([relay.stop(), worker.stop()]);
    stopped = true;
  }, 300_000);
});
