/**
 * The operator verbs end to end through the real `idempo` binary: each
 * prints what it changed and what the next retry will do, `--json` says the
 * same for programs, and a delete under a live owner is refused with the
 * owner and what a forced delete can repeat.
 */
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { idempo } from "./support/cli.ts";

const poison = workflow("poison")
  .phase("compute", () => ({ total: 10n }))
  .respond(() => ({ status: 200, body: null }));

async function crash(engine: Engine, point: string, key: string): Promise<void> {
  setFaultHook(engine, (p) => {
    if (p === point) throw new CrashSignal(p);
  });
  await engine.runOnce(checkout, { tenantId: "acme", key, input: { amountCents: 100 } }).catch(() => undefined);
  setFaultHook(engine, undefined);
}

let engine: Engine;
const clone = useClonedDatabase("idempo_cli_verbs", {
  pool: 4,
  prepare: async (db) => {
    engine = createEngine({ db });
    const live = createEngine({ db, leaseMs: 600_000 });
    await crash(live, "after:phase:create_order", "live-1");
    await crash(live, "after:phase:create_order", "live-2");
    await crash(live, "called:step:charge", "stuck-1");
    await crash(live, "after:step:charge", "stuck-2");
    await engine.runOnce(poison, { tenantId: "acme", key: "poison-1", input: {} }).catch(() => undefined);
    await engine.runOnce(poison, { tenantId: "acme", key: "poison-2", input: {} }).catch(() => undefined);
    await engine.runOnce(checkout, { tenantId: "acme", key: "done-1", input: { amountCents: 100 } });
    // The "stuck" ones were crashed with a live lease; end it so they count as stuck.
    await engine.release("acme", "stuck-1");
    await engine.release("acme", "stuck-2");
  },
});
/** Run the CLI; `flat` is stdout with its wrapped lines joined again, for matching sentences. */
const cli = async (args: string[]) => {
  const res = await idempo(args, { DATABASE_URL: clone.url }, 120_000);
  return { ...res, flat: res.stdout.replace(/\n {2}/g, " ") };
};

describe("keys delete under a live owner", { timeout: 300_000 }, () => {
  it("is refused without --force, naming the owner and what a forced delete can repeat; nothing changes", async () => {
    const res = await cli(["keys", "delete", "acme", "live-1", "--yes"]);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr).toMatch(
      /^idempo: refused to delete acme\/live-1 \(checkout, in flight, recovery point create_order\)/,
    );
    expect(res.stderr).toMatch(/live owner \w+ \(lease \d+m \d+s left\) is still working on it/);
    expect(res.stderr).toMatch(/can repeat phase create_order; .*cancel it \(idempo keys cancel\), or pass --force/);
    expect(await engine.inspect("acme", "live-1")).not.toBeNull();
  });

  it("with --force it deletes and says what the next call can repeat", async () => {
    const res = await cli(["keys", "delete", "acme", "live-2", "--yes", "--force", "--json"]);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({
      deleted: true,
      forced: true,
      recoveryPoint: "create_order",
      canRepeat: ["phase:create_order"],
    });
    expect(await engine.inspect("acme", "live-2")).toBeNull();
  });
});

describe("keys parked, show, unpark", { timeout: 300_000 }, () => {
  it("parked lists each parked run with its reason", async () => {
    const res = await cli(["keys", "parked"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^2 parked keys:\n\nTENANT\s+KEY\s+WORKFLOW\s+RECOVERY POINT\s+ATTEMPTS\s+PARKED FOR/);
    expect(res.stdout).toMatch(/acme\s+poison-1\s+poison\s+-\s+1/);
    expect(res.stdout).toMatch(/↳ phase 'compute' returned a value that cannot be stored as JSON: \$\.total/);
    const json = await cli(["keys", "parked", "--json"]);
    const first = JSON.parse(json.stdout.split("\n")[0] ?? "{}") as Record<string, unknown>;
    expect(first).toMatchObject({ status: "parked", parkedReason: expect.stringMatching(/\$\.total/) });
  });

  it("show says a retry fails with run_parked and what to do", async () => {
    const res = await cli(["keys", "show", "acme", "poison-1"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/parked/);
    expect(res.stdout).toMatch(/fail with RunParkedError \(500 run_parked\)/);
  });

  it("unpark makes it takeable and says the next retry takes over", async () => {
    const res = await cli(["keys", "unpark", "acme", "poison-1", "--yes"]);
    expect(res.code).toBe(0);
    expect(res.flat).toMatch(/^unparked acme\/poison-1 \(was parked after 1 attempts: phase 'compute'/);
    expect(res.flat).toMatch(/a retry now will take over as attempt 2 and start from the beginning/);
    expect((await engine.inspect("acme", "poison-1"))?.status).toBe("in_flight");
    const again = await cli(["keys", "unpark", "acme", "poison-1", "--yes"]);
    expect(again).toMatchObject({ code: 1, stdout: "" });
    expect(again.stderr).toMatch(/is in_flight, not parked/);
  });
});

describe("keys cancel, retry-from, release", { timeout: 300_000 }, () => {
  it("cancel stores a 409 answer and says a retry replays it; a completed key is refused", async () => {
    const res = await cli(["keys", "cancel", "acme", "stuck-1", "--yes"]);
    expect(res.code).toBe(0);
    expect(res.flat).toMatch(/^canceled acme\/stuck-1 \(was stuck at recovery point create_order\): stored 409/);
    expect(res.flat).toMatch(/a retry now will replay the stored 409 response/);
    const replay = await engine.runOnce(checkout, { tenantId: "acme", key: "stuck-1", input: { amountCents: 100 } });
    expect(replay).toMatchObject({ status: 409, replayed: true, outcome: "canceled" });
    const done = await cli(["keys", "cancel", "acme", "done-1", "--yes"]);
    expect(done).toMatchObject({ code: 1, stdout: "" });
    expect(done.stderr).toMatch(/already completed \(succeeded, 201\)/);
  });

  it("cancel with --status and --body stores that answer; --json prints the record it left", async () => {
    const res = await cli([
      "keys",
      "cancel",
      "acme",
      "poison-2",
      "--status",
      "410",
      "--body",
      '{"why":"x"}',
      "--yes",
      "--json",
    ]);
    expect(res.code).toBe(0);
    const doc = JSON.parse(res.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      action: "canceled",
      before: { status: "parked" },
      after: { status: "completed", response: { status: 410, outcome: "canceled" } },
      nextRetry: expect.stringMatching(/^replay the stored 410 response/),
    });
  });

  it("retry-from moves the recovery point back and says what runs again", async () => {
    const res = await cli(["keys", "retry-from", "acme", "stuck-2", "charge", "--yes"]);
    expect(res.code).toBe(0);
    expect(res.flat).toMatch(/^moved acme\/stuck-2 back from recovery point charge to create_order: step charge will/);
    expect(res.flat).toMatch(/a retry now will take over as attempt 2 and resume after create_order: next step/);
    const bad = await cli(["keys", "retry-from", "acme", "stuck-2", "nope", "--yes"]);
    expect(bad).toMatchObject({ code: 1 });
    expect(bad.stderr).toMatch(/'nope' is not a phase or step of checkout/);
    const resend = await cli(["keys", "retry-from", "acme", "stuck-2", "create_order", "--resend-outbox", "--yes"]);
    expect(resend.stderr).toBe("");
    expect(resend.code).toBe(0);
    expect(resend.flat).toMatch(/will run again; their outbox messages get new delivery keys/);
    const { rows } = await sql<{ round: number }>`
      SELECT outbox_round AS round FROM idempo.runs WHERE tenant_id = 'acme' AND key = 'stuck-2'`.execute(clone.db);
    expect(rows).toEqual([{ round: 1 }]);
  });

  it("release of a live owner says its next renewal fails and cannot renew it back", async () => {
    const res = await cli(["keys", "release", "acme", "live-1", "--yes"]);
    expect(res.code).toBe(0);
    expect(res.flat).toMatch(/that owner's next renewal or write fails with lease_lost and cannot renew it back/);
    expect((await engine.inspect("acme", "live-1"))?.ownerToken).toBeNull();
  });
});

describe("resume and runs whose attempts ran out", { timeout: 300_000 }, () => {
  // Last in the file: resume also finishes whatever the tests above left stuck.
  it("lists a run its takeover parked, with the reason, in the table and in --json", async () => {
    const worn = async (key: string) => {
      await crash(engine, "after:phase:create_order", key);
      await engine.release("acme", key);
      // As if 20 attempts had already crashed: the next takeover would start attempt 21 of 20.
      await sql`UPDATE idempo.runs SET attempt = 20 WHERE tenant_id = 'acme' AND key = ${key}`.execute(clone.db);
    };
    await worn("worn-1");
    const table = await cli(["resume", "--workflows", "test/fixtures/checkout-workflow.ts"]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/acme\s+worn-1\s+checkout\s+stale\s+parked\s+-\n {2}maxAttempts \(20\) reached/);
    expect(table.stdout).toMatch(/1 parked\n$/);
    await worn("worn-2");
    const json = await cli(["resume", "--workflows", "test/fixtures/checkout-workflow.ts", "--json"]);
    expect(json.code).toBe(0);
    const lines = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toContainEqual({
      tenantId: "acme",
      key: "worn-2",
      workflow: "checkout",
      was: "stale",
      result: "parked",
      reason: expect.stringMatching(/^maxAttempts \(20\) reached/),
    });
    expect((await engine.inspect("acme", "worn-2"))?.status).toBe("parked");
  });
});
