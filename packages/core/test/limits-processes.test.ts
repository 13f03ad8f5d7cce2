/**
 * Limits shared by processes: worker processes on one database never run
 * more attempts of a `.concurrency` key than its `max`, counted by the
 * attempts themselves in a row-locked counter; a SIGKILLed process's slot
 * frees when its lease runs out, not before, and without a takeover; and
 * a rate limit's calls from two processes stay within the bucket by the
 * database clock. Every verdict counts rows; waits are bounded by work.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { createEngine, IdempotencyKeyInProgressError } from "../src/index.ts";
import { gauged, holder, LIMITS_DDL, RATE, rated } from "./fixtures/limited-workflows.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase({ pool: 6 });
const CHILD = fileURLToPath(new URL("./fixtures/limits-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const query = (text: string) => sql.raw(text).execute(t.db);

interface Child {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exit: Promise<NodeJS.Signals | number | null>;
}
const children = new Set<Child>();
afterEach(async () => {
  for (const c of children) c.child.kill("SIGKILL");
  await Promise.all([...children].map((c) => c.exit));
  children.clear();
});

function startChild(args: readonly string[]): Child {
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@idempo/source", CHILD, t.url, ...args], {
    cwd: PACKAGE_DIR,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const ready = new Promise<void>((resolve, reject) => {
    lines.on("line", (line) => line === "ready" && resolve());
    child.once("exit", (code, signal) => reject(new Error(`child exited before it was ready (${signal ?? code})`)));
  });
  ready.catch(() => undefined);
  const exit = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.once("exit", (code, signal) => resolve(signal ?? code)),
  );
  const c = { child, ready, exit };
  children.add(c);
  void exit.then(() => children.delete(c));
  return c;
}

async function stop(c: Child): Promise<void> {
  c.child.kill("SIGTERM");
  expect(await c.exit).toBe(0);
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Bounded by work; the timeout only catches a hang on a loaded machine.
  await expect.poll(check, { timeout: 120_000, interval: 50, message: what }).toBe(true);
};

beforeAll(async () => {
  await sql.raw(LIMITS_DDL).execute(t.db);
});

describe(".concurrency across worker processes", () => {
  it("three workers, four runs each at once, never run more than max = 2 attempts of one key", {
    timeout: 180_000,
  }, async () => {
    const engine = createEngine({ db: t.db });
    const wf = gauged(query, 100);
    const workers = [startChild(["worker"]), startChild(["worker"]), startChild(["worker"])];
    await Promise.all(workers.map((w) => w.ready));
    const runs = 16;
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < runs; i++) await engine.enqueue(tx, wf, { tenantId: `t${i % 3}`, key: `g${i}`, input: {} });
    });
    const gauge = async () =>
      (
        await sql<{ running: number; peak: number; done: number }>`
          SELECT running, peak, done FROM limit_gauge WHERE name = 'gauged'`.execute(t.db)
      ).rows[0] as { running: number; peak: number; done: number };
    await until(async () => (await gauge()).done === runs, "every run's step ran");
    await Promise.all(workers.map(stop));

    expect(await gauge()).toMatchObject({ running: 0, done: runs });
    // 12 places to run at once across the processes; the limit held every attempt to 2.
    expect((await gauge()).peak).toBeLessThanOrEqual(2);
    const { rows } = await sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM idempo.runs WHERE workflow = 'limits_gauged' GROUP BY status`.execute(
      t.db,
    );
    expect(rows).toEqual([{ status: "completed", n: runs }]);
  });
});

describe("a SIGKILLed holder's slot", () => {
  it("stays held while its lease lasts and frees when the lease runs out, with no takeover", {
    timeout: 120_000,
  }, async () => {
    const leaseMs = 3_000;
    const engine = createEngine({ db: t.db, leaseMs });
    const wf = holder(query, leaseMs, false);
    const c = startChild(["hold", "held-a", String(leaseMs)]);
    await c.ready;
    await until(
      async () => (await sql`SELECT 1 FROM holding WHERE key = 'held-a'`.execute(t.db)).rows.length === 1,
      "the child holds the slot",
    );
    c.child.kill("SIGKILL");
    expect(await c.exit).toBe("SIGKILL");

    // While the dead process's lease lasts (read on the database clock), the slot is its: a second key waits.
    const a = await engine.inspect("limits", "held-a");
    expect(a).toMatchObject({ status: "in_flight" });
    const left = (a as { leaseRemainingMs: number }).leaseRemainingMs;
    if (left > 500) {
      const refused = await engine.runOnce(wf, { tenantId: "limits", key: "held-b", input: {} }).catch((e) => e);
      expect(refused).toBeInstanceOf(IdempotencyKeyInProgressError);
      expect((refused as IdempotencyKeyInProgressError).retryAfterMs).toBeGreaterThan(0);
      expect(await engine.inspect("limits", "held-b")).toMatchObject({ status: "suspended" });
    }

    // Once it ran out, the slot is free: the second key's attempt takes it and completes.
    const done = await engine.runOnce(wf, { tenantId: "limits", key: "held-b", input: {}, waitInFlightMs: 60_000 });
    expect(done).toMatchObject({ status: 200, outcome: "succeeded" });
    expect((await sql`SELECT key FROM holding ORDER BY key`.execute(t.db)).rows).toEqual([
      { key: "held-a" },
      { key: "held-b" },
    ]);
    // Freed by the lease alone: the dead attempt's run was never taken over.
    expect(await engine.inspect("limits", "held-a")).toMatchObject({ status: "in_flight", attempt: 1 });
  });
});

describe("a rate limit across two worker processes", () => {
  it("no call comes before a token granted to it, and grants never exceed burst + rate × elapsed (database clock)", {
    timeout: 180_000,
  }, async () => {
    const perMs = RATE.perSecond / 1000;
    // Every take of the bucket, logged by the database: the instant its token is due (now, or later when reserved).
    await sql
      .raw(`
      CREATE TABLE token_grants (due_ms float8 NOT NULL);
      CREATE FUNCTION log_grant() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO public.token_grants
        VALUES (extract(epoch FROM NEW.refilled_at) * 1000 + GREATEST(0, -NEW.tokens) / ${perMs});
        RETURN NEW;
      END $$;
      CREATE TRIGGER log_grant AFTER UPDATE ON idempo.rate_limits FOR EACH ROW EXECUTE FUNCTION log_grant();`)
      .execute(t.db);
    const engine = createEngine({ db: t.db, rateLimits: { api: RATE } });
    const wf = rated(query);
    const workers = [startChild(["worker"]), startChild(["worker"])];
    await Promise.all(workers.map((w) => w.ready));
    const runs = 24;
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < runs; i++) await engine.enqueue(tx, wf, { tenantId: "rate", key: `r${i}`, input: {} });
    });
    const ms = async (text: string) =>
      (await sql.raw<{ ms: number }>(text).execute(t.db)).rows.map((r) => Number(r.ms));
    await until(async () => (await ms("SELECT 1 AS ms FROM token_calls")).length === runs, "every run called once");
    await Promise.all(workers.map(stop));

    const calls = await ms("SELECT extract(epoch FROM at) * 1000 AS ms FROM token_calls ORDER BY at");
    const grants = await ms("SELECT due_ms AS ms FROM token_grants ORDER BY due_ms");
    expect(calls).toHaveLength(runs);
    expect(grants).toHaveLength(runs); // one token per call, no more
    // By each call's time, as many tokens were due: no call went ahead of the bucket.
    const early = calls.map((x, j) => j + 1 - grants.filter((due) => due <= x + 0.001).length);
    expect(Math.max(...early)).toBeLessThanOrEqual(0);
    // Grants in every window [due_i, due_j]: at most burst + rate × its length (µs rounding aside).
    let worst = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < grants.length; i++) {
      for (let j = i; j < grants.length; j++) {
        worst = Math.max(worst, j - i + 1 - (RATE.burst + perMs * ((grants[j] as number) - (grants[i] as number))));
      }
    }
    expect(worst).toBeLessThanOrEqual(0.001);
  });
});
