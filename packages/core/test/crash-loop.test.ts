/**
 * Field fault of the kind "recovery (crash loops, isolating a poison run,
 * counting attempts)" (BR-26), with a real process death: a step that kills
 * its own process (SIGKILL, exit 137) every time it runs. The test starts
 * the process and restarts it whenever it dies, as a supervisor would. Every
 * takeover counts as an attempt at claim time, so after `maxAttempts`
 * deaths the run is parked and the worker finishes the other runs; every
 * call of the poison step carried the same derived key and params.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createEngine, RunParkedError } from "../src/index.ts";
import { CrashSignal, setFaultHook } from "../src/internal.ts";
import { rejectionOf } from "./field-support/harness.ts";
import { CALLS_DDL, crashLoopCheckout, LEASE_MS, MAX_ATTEMPTS } from "./fixtures/crash-loop-checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { sleep } from "./support/faults.ts";

const t = useTestDatabase();
const CHILD = fileURLToPath(new URL("./fixtures/crash-loop-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
/** Restarts allowed before the test gives up: far more than the MAX_ATTEMPTS deaths expected. */
const MAX_STARTS = 12;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

function start(args: string[]): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@idempo/source", CHILD, t.url, ...args], {
    cwd: PACKAGE_DIR,
    stdio: ["ignore", "pipe", "inherit"],
  });
  child.stdout?.resume();
  const exit = new Promise<Exit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { child, exit };
}

const died = (e: Exit) => e.signal === "SIGKILL" || e.code === 137;

async function statuses(keys: string[]): Promise<Record<string, string>> {
  const { rows } = await sql<{ key: string; status: string }>`
    SELECT key, status FROM idempo.runs WHERE tenant_id = 'cl' AND key IN (${sql.join(keys)})`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.key, r.status]));
}

describe("a step that kills its process every time (BR-26)", () => {
  it("is parked after maxAttempts deaths while the restarted worker finishes the other runs, with one key and one set of params", async () => {
    await sql.raw(CALLS_DDL).execute(t.db);
    const engine = createEngine({ db: t.db, leaseMs: LEASE_MS });
    const checkout = crashLoopCheckout(t.db, () => undefined);
    const good = ["g1", "g2", "g3"];
    // The good runs crashed once after their first phase and are otherwise healthy.
    setFaultHook(engine, (point) => {
      if (point === "after:phase:create_order") throw new CrashSignal(point);
    });
    for (const key of good) {
      const e = await rejectionOf(
        engine.runOnce(checkout, { tenantId: "cl", key, input: { cartId: `cart-${key}`, poison: false } }),
      );
      expect(e).toBeInstanceOf(CrashSignal);
      await engine.release("cl", key);
    }
    setFaultHook(engine, undefined);

    // Attempt 1 of p1: its process dies in the step.
    const first = await start(["run", "p1"]).exit;
    expect(died(first)).toBe(true);
    let deaths = 1;

    // A supervisor restarts the worker whenever it dies, until p1 is parked and the others completed.
    const done = (s: Record<string, string>) => s.p1 === "parked" && good.every((k) => s[k] === "completed");
    let starts = 0;
    let lastExit: Exit | undefined;
    while (!done(await statuses(["p1", ...good]))) {
      expect(starts++).toBeLessThan(MAX_STARTS);
      const { child, exit } = start(["worker"]);
      let exited: Exit | undefined;
      void exit.then((e) => {
        exited = e;
      });
      while (!exited && !done(await statuses(["p1", ...good]))) await sleep(50);
      if (!exited) {
        child.kill("SIGTERM");
        exited = await exit;
      }
      lastExit = exited;
      if (died(exited)) deaths++;
      else expect(exited).toEqual({ code: 0, signal: null });
    }
    // Counted at claim time: the takeover that would have started attempt MAX_ATTEMPTS + 1 parked it instead.
    expect(deaths).toBe(MAX_ATTEMPTS);
    expect(lastExit).toEqual({ code: 0, signal: null });
    const p1 = await engine.inspect("cl", "p1");
    expect(p1).toMatchObject({ status: "parked", attempt: MAX_ATTEMPTS, recoveryPoint: "create_order" });
    expect(p1?.parkedReason).toMatch(new RegExp(`maxAttempts \\(${MAX_ATTEMPTS}\\)`));
    const input = { cartId: "cart-p1", poison: true };
    expect(await rejectionOf(engine.runOnce(checkout, { tenantId: "cl", key: "p1", input }))).toBeInstanceOf(
      RunParkedError,
    );
    expect(await engine.resumeStale({ workflows: [checkout] })).toEqual({ resumed: [], failed: [], parked: [] });

    const calls = async () =>
      (
        await sql<{ key: string; derived_key: string; params: string }>`
          SELECT key, derived_key, params FROM crash_loop_calls ORDER BY id`.execute(t.db)
      ).rows;
    const p1Calls = (await calls()).filter((c) => c.key === "p1");
    expect(p1Calls).toHaveLength(MAX_ATTEMPTS);
    expect(new Set(p1Calls.map((c) => `${c.derived_key} ${c.params}`)).size).toBe(1);

    // Fixed (this process's step never crashes): unpark, and p1 completes with the same key and params.
    await engine.unpark("cl", "p1");
    expect(await engine.runOnce(checkout, { tenantId: "cl", key: "p1", input })).toMatchObject({
      status: 201,
      body: { orderId: "o_p1", chargeId: "ch_o_p1" },
    });
    const after = (await calls()).filter((c) => c.key === "p1");
    expect(after).toHaveLength(MAX_ATTEMPTS + 1);
    expect(new Set(after.map((c) => `${c.derived_key} ${c.params}`)).size).toBe(1);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE tenant_id = 'cl'`.execute(
      t.db,
    );
    expect(rows[0]?.n).toBe(4);
  }, 600_000);
});
