/**
 * Schedules fired by real worker processes: three workers firing one
 * schedule every second while two of them are SIGKILLed and restarted make
 * exactly one run per tick; and ticks missed while every worker was down
 * follow the schedule's `catchUp`. Ticks are counted by their scheduled
 * times (the run keys), never by the wall clock; waits are bounded by work.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine } from "../src/index.ts";
import type { ScheduleSpec } from "./fixtures/schedule-tick.ts";
import { EFFECTS_DDL, scheduleTick } from "./fixtures/schedule-tick.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const CHILD = fileURLToPath(new URL("./fixtures/schedule-worker-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const SECOND = 1000;

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

function startWorker(specs: readonly ScheduleSpec[]): Child {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--conditions=@idempo/source", CHILD, t.url, JSON.stringify(specs)],
    { cwd: PACKAGE_DIR, stdio: ["ignore", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const ready = new Promise<void>((resolve, reject) => {
    lines.on("line", (line) => line === "ready" && resolve());
    child.once("exit", (code, signal) => reject(new Error(`worker exited before it was ready (${signal ?? code})`)));
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

async function kill(c: Child): Promise<void> {
  c.child.kill("SIGKILL");
  expect(await c.exit).toBe("SIGKILL");
}

async function stop(c: Child): Promise<void> {
  c.child.kill("SIGTERM");
  expect(await c.exit).toBe(0);
}

/** The ticks (ISO times from the run keys) that started a run of `name`, oldest first. */
async function firedTicks(name: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    SELECT key FROM idempo.runs WHERE tenant_id = 'sched' AND key LIKE ${`schedule:${name}:%`} ORDER BY key`.execute(
    t.db,
  );
  return rows.map((r) => r.key.slice(`schedule:${name}:`.length));
}

/** The ticks each run recorded in its phase (one row per execution of the phase that committed). */
async function effects(name: string): Promise<string[]> {
  const { rows } = await sql<{ at: string }>`
    SELECT at FROM schedule_effects WHERE schedule = ${name} ORDER BY at`.execute(t.db);
  return rows.map((r) => r.at);
}

async function dbNow(): Promise<number> {
  const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(t.db);
  return (rows[0] as { now: Date }).now.getTime();
}

const until = async (check: () => Promise<boolean>, what: string) => {
  // Bounded by work; the timeout only catches a hang on a loaded machine.
  await expect.poll(check, { timeout: 240_000, interval: 100, message: what }).toBe(true);
};

const seconds = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => new Date(from + i * SECOND).toISOString());

describe("a schedule every second under three worker processes", () => {
  it("60 ticks make exactly 60 runs while two of the workers are SIGKILLed and restarted", {
    timeout: 400_000,
  }, async () => {
    await sql.raw(EFFECTS_DDL).execute(t.db);
    const spec: ScheduleSpec = { name: "every-second", catchUp: "all", graceMs: 60_000 };
    // Registered here first, so that the first tick is known; each worker registers it again at start-up.
    const s = await createEngine({ db: t.db }).schedule(spec.name, {
      cron: "* * * * * *",
      workflow: scheduleTick,
      tenantId: "sched",
      catchUp: spec.catchUp,
    });
    const first = (s.nextTickAt as Date).getTime();
    const wanted = seconds(first, 60);
    const last = wanted[59] as string;
    const inWindow = (ticks: string[]) => ticks.filter((k) => k >= (wanted[0] as string) && k <= last);

    const steady = startWorker([spec]);
    let a = startWorker([spec]);
    let b = startWorker([spec]);
    await Promise.all([steady.ready, a.ready, b.ready]);

    // Kill a worker after every 10 fired ticks, A and B in turn, and restart it at once: 4 kills while firing.
    const kills: string[] = [];
    for (const at of [10, 20, 30, 40]) {
      await until(async () => inWindow(await firedTicks(spec.name)).length >= at, `${at} ticks fired`);
      if (kills.length % 2 === 0) {
        await kill(a);
        a = startWorker([spec]);
        kills.push("a");
      } else {
        await kill(b);
        b = startWorker([spec]);
        kills.push("b");
      }
    }
    await until(async () => inWindow(await effects(spec.name)).length >= 60, "the 60 runs completed");
    await Promise.all([a.ready, b.ready]);
    await Promise.all([stop(steady), stop(a), stop(b)]);

    expect(kills).toEqual(["a", "b", "a", "b"]);
    expect(inWindow(await firedTicks(spec.name))).toEqual(wanted);
    expect(inWindow(await effects(spec.name))).toEqual(wanted);
    const { rows } = await sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM idempo.runs
      WHERE key >= ${`schedule:${spec.name}:${wanted[0]}`} AND key <= ${`schedule:${spec.name}:${last}`}
      GROUP BY status`.execute(t.db);
    expect(rows).toEqual([{ status: "completed", n: 60 }]);
  });
});

describe("ticks missed while every worker was stopped", () => {
  it("follow catchUp: 'none' skips them, 'latest' runs the most recent once, 'all' runs each", {
    timeout: 400_000,
  }, async () => {
    await sql.raw(EFFECTS_DDL).execute(t.db);
    const graceMs = 5_000;
    const specs: ScheduleSpec[] = (["none", "latest", "all"] as const).map((catchUp) => ({
      name: `missed-${catchUp}`,
      catchUp,
      graceMs,
    }));
    const before = startWorker(specs);
    await before.ready;
    for (const s of specs) await until(async () => (await firedTicks(s.name)).length >= 2, `${s.name} fired`);
    await kill(before);

    // No worker runs now. The last tick each schedule fired, and a wait (on the database clock) until
    // at least three more ticks are older than the grace: those are missed, whatever happens next.
    const engine = createEngine({ db: t.db });
    const lastBefore = new Map((await engine.listSchedules()).map((s) => [s.name, (s.lastTickAt as Date).getTime()]));
    const latestLast = Math.max(...lastBefore.values());
    await until(async () => (await dbNow()) > latestLast + graceMs + 4 * SECOND, "four ticks missed");

    const after = startWorker(specs);
    await after.ready;
    const back = await dbNow();
    for (const s of specs) {
      await until(
        async () => (await firedTicks(s.name)).some((k) => Date.parse(k) > back + 2 * SECOND),
        `${s.name} back`,
      );
    }
    await stop(after);

    for (const s of specs) {
      const last = lastBefore.get(s.name) as number;
      const { rows } = await sql<{ at: string; created: Date }>`
        SELECT substr(key, ${`schedule:${s.name}:`.length + 1}) AS at, created_at AS created FROM idempo.runs
        WHERE key > ${`schedule:${s.name}:${new Date(last).toISOString()}`} AND key LIKE ${`schedule:${s.name}:%`}
        ORDER BY key`.execute(t.db);
      // The first round after the restart: its runs were created in one transaction, at its now().
      const round = Math.min(...rows.map((r) => r.created.getTime()));
      const missed: string[] = [];
      for (let x = last + SECOND; x < round - graceMs; x += SECOND) missed.push(new Date(x).toISOString());
      expect(missed.length).toBeGreaterThanOrEqual(4);
      const fired = rows.map((r) => r.at);
      const firedMissed = fired.filter((k) => Date.parse(k) < round - graceMs);
      const onTime = fired.filter((k) => Date.parse(k) >= round - graceMs);
      const expectedMissed = { none: [], latest: missed.slice(-1), all: missed }[s.catchUp];
      expect({ schedule: s.name, firedMissed }).toEqual({ schedule: s.name, firedMissed: expectedMissed });
      // On-time ticks: every one from the first on-time tick on, none skipped.
      const firstOnTime = Date.parse(onTime[0] as string);
      expect(firstOnTime).toBeGreaterThanOrEqual(round - graceMs);
      expect(firstOnTime - SECOND).toBeLessThan(round - graceMs);
      expect(onTime).toEqual(seconds(firstOnTime, onTime.length));
    }
  });
});
