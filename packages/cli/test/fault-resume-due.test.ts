/**
 * `idempo resume` with no worker running: runs that are due (a sleep past
 * its wake-up time, an enqueued run, a wait whose signal arrived or whose
 * timeout passed) must be resumed too, not only stale in-flight runs (it
 * used to print "no stale runs" while such runs had been due for minutes).
 * The output says which runs were taken over and which were resumed.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { hurried, payment, trial } from "./fixtures/durable-workflows.ts";
import { idempo, jsonLines } from "./support/cli.ts";

const MODULE = "test/fixtures/resume-workflows.ts";
const SHORT_LEASE_MS = 200;
const HOUR = 3_600_000;

let engine: Engine;
const clone = useClonedDatabase("idempo_cli_resume_due", { pool: 4 });
const cli = (args: string[]) => idempo(args, { DATABASE_URL: clone.url }, 120_000);

async function crashCheckout(tenantId: string, key: string): Promise<void> {
  const short = createEngine({ db: clone.db, leaseMs: SHORT_LEASE_MS });
  setFaultHook(short, (p) => {
    if (p === "called:step:charge") throw new CrashSignal(p);
  });
  await expect(short.runOnce(checkout, { tenantId, key, input: { amountCents: 500 } })).rejects.toBeInstanceOf(
    CrashSignal,
  );
}

/**
 * In `tenant`: a stale checkout, a sleep that is due, an enqueued run that
 * will suspend again (in its hour's sleep), a timed-out wait, a signalled wait, and two runs that
 * are not due (an hour's sleep, a wait with no signal yet).
 */
async function seed(tenantId: string): Promise<void> {
  await crashCheckout(tenantId, "order-1");
  await engine.runOnce(trial, { tenantId, key: "slept", input: { sleepMs: 0 } });
  await engine.enqueue(clone.db, trial, { tenantId, key: "enqueued", input: { sleepMs: HOUR } });
  await engine.runOnce(hurried, { tenantId, key: "timed-out", input: {} });
  await engine.runOnce(payment, { tenantId, key: "signalled", input: {} });
  await engine.signal(tenantId, "signalled", "confirmed", { by: "provider" });
  await engine.runOnce(trial, { tenantId, key: "asleep", input: { sleepMs: HOUR } });
  await engine.runOnce(payment, { tenantId, key: "waiting", input: {} });
  // Due by the database clock: the checkout's lease has run out and the 1 ms wait has timed out.
  for (let i = 0; i < 200; i++) {
    const [stale, wait] = await Promise.all([
      engine.inspect(tenantId, "order-1"),
      engine.inspect(tenantId, "timed-out"),
    ]);
    const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(clone.db);
    const now = (rows[0] as { now: Date }).now.getTime();
    if ((stale?.leaseRemainingMs ?? 1) <= 0 && (wait?.wakeAt?.getTime() ?? now) < now) break;
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  engine = createEngine({ db: clone.db });
});

describe("idempo resume and due suspended runs", { timeout: 300_000 }, () => {
  it("takes the stale run over and resumes every due one, listing each with what it was and what it did", async () => {
    await seed("acme");
    const res = await cli(["resume", "--workflows", MODULE]);
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    const lines = res.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^TENANT\s+KEY\s+WORKFLOW\s+WAS\s+RESULT\s+RESPONSE$/);
    const row = (key: string) => lines.map((l) => l.replace(/\s+/g, " ")).find((l) => l.startsWith(`acme ${key} `));
    expect(row("order-1")).toBe("acme order-1 checkout stale finished 201 succeeded");
    expect(row("slept")).toBe("acme slept trial due finished 200 succeeded");
    expect(row("enqueued")).toBe("acme enqueued trial due suspended 202 suspended");
    expect(row("timed-out")).toBe("acme timed-out hurried due finished 408 failed");
    expect(row("signalled")).toBe("acme signalled payment due finished 201 succeeded");
    expect(row("asleep")).toBeUndefined();
    expect(row("waiting")).toBeUndefined();
    expect(lines.at(-1)).toBe(
      "1 stale run taken over, 4 due runs resumed: 4 finished, 1 suspended again, 0 failed, 0 parked",
    );
    expect((await engine.inspect("acme", "slept"))?.status).toBe("completed");
    expect((await engine.inspect("acme", "signalled"))?.response?.body).toEqual({ captured: "auth_signalled" });
    expect((await engine.inspect("acme", "timed-out"))?.status).toBe("completed");
    expect(await engine.inspect("acme", "enqueued")).toMatchObject({ status: "suspended", recoveryPoint: "cool_off" });
    expect((await engine.inspect("acme", "order-1"))?.status).toBe("completed");
    expect((await engine.inspect("acme", "asleep"))?.status).toBe("suspended");
    expect((await engine.inspect("acme", "waiting"))?.status).toBe("suspended");
  });

  it("--json says the same, one object per run", async () => {
    await seed("globex");
    const res = await cli(["resume", "--workflows", MODULE, "--json"]);
    expect(res.code).toBe(0);
    const runs = jsonLines(res.stdout).map((r) => `${r.key} ${r.was} ${r.result} ${r.status} ${r.outcome}`);
    expect(runs.sort()).toEqual(
      [
        "order-1 stale finished 201 succeeded",
        "slept due finished 200 succeeded",
        "enqueued due suspended 202 suspended",
        "timed-out due finished 408 failed",
        "signalled due finished 201 succeeded",
      ].sort(),
    );
  });

  it("with nothing stale or due says so, naming both kinds", async () => {
    const res = await cli(["resume", "--workflows", MODULE]);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      "nothing to resume: no stale in-flight runs and no due suspended runs of checkout, hurried, payment, trial\n",
    );
  });
});
