/**
 * End to end: the real `idempo` binary against a real database seeded by
 * real workflow runs (see support/seed.ts). Read-only commands run once,
 * concurrently, before the tests look at what they printed; commands that
 * change records run in order afterwards.
 */
import { readdirSync } from "node:fs";
import { createServer } from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import type { CliResult } from "./support/cli.ts";
import { idempo, jsonLines } from "./support/cli.ts";
import { useSeededDatabase } from "./support/seed.ts";

// Every migration file of the repository, so that adding one does not break these tests.
const MIGRATIONS = readdirSync(new URL("../../../migrations", import.meta.url))
  .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
  .sort()
  .map((f) => f.replace(/\.sql$/, ""));

const seeded = useSeededDatabase();
const ANSI = /\u001b\[/;

/** Run commands with at most `width` at a time (the machine has two cores). */
async function runAll(commands: Record<string, { args: string[]; env?: Record<string, string> }>, width = 3) {
  const names = Object.keys(commands);
  const results: Record<string, CliResult> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        const c = commands[name] as { args: string[]; env?: Record<string, string> };
        results[name] = await idempo(c.args, { DATABASE_URL: seeded.url, ...c.env });
      }
    }),
  );
  return results;
}

function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

let r: Record<string, CliResult>;
beforeAll(async () => {
  r = await runAll({
    list: { args: ["keys", "list"] },
    listJson: { args: ["keys", "list", "--json"] },
    listAcmeInFlight: { args: ["keys", "list", "--tenant", "acme", "--status", "in_flight", "--json"] },
    listStuck: { args: ["keys", "list", "--stuck", "--json"] },
    listOld: { args: ["keys", "list", "--older-than", "1h", "--json"] },
    listPage1: { args: ["keys", "list", "--limit", "4"] },
    stuck: { args: ["keys", "stuck"] },
    stuckJson: { args: ["keys", "stuck", "--json"] },
    showStuck: { args: ["keys", "show", "acme", "order-1002"] },
    showStuckJson: { args: ["keys", "show", "acme", "order-1002", "--json"] },
    showLive: { args: ["keys", "show", "acme", "order-1003"] },
    showDoneJson: { args: ["keys", "show", "acme", "order-1001", "--json"] },
    showDoneSecrets: { args: ["keys", "show", "acme", "order-1001", "--json", "--show-response", "--show-state"] },
    showMissing: { args: ["keys", "show", "acme", "no-such-key"] },
    releaseNoYes: { args: ["keys", "release", "acme", "order-1003"] },
    stats: { args: ["stats"] },
    statsJson: { args: ["stats", "--json"] },
    sweepDry: { args: ["sweep", "--dry-run", "--json"] },
    printOther: { args: ["migrate", "--print", "--schema", "other"] },
    forced: { args: ["keys", "list", "--stuck"], env: { FORCE_COLOR: "1" } },
    noColor: { args: ["keys", "list", "--stuck"], env: { FORCE_COLOR: "1", NO_COLOR: "1" } },
  });
}, 600_000); // bounded work (about 25 commands, 3 at a time); a loaded machine only makes it slower

describe("keys list", () => {
  it("prints an aligned table of every key, newest first, within 100 columns", () => {
    expect(r.list?.code).toBe(0);
    const lines = r.list?.stdout.trimEnd().split("\n") ?? [];
    expect(lines[0]).toMatch(/^TENANT\s+KEY\s+WORKFLOW\s+STATUS\s+RECOVERY POINT\s+ATTEMPTS\s+LEASE\s+AGE$/);
    const keys = lines.slice(1, 7).map((l) => l.split(/\s+/).slice(0, 2).join("/"));
    expect(keys).toEqual([
      "acme/order-1004",
      "acme/order-1003",
      "globex/order-2001",
      "acme/order-1002",
      "globex/order-1001",
      "acme/order-1001",
    ]);
    expect(lines[3]).toMatch(/globex\s+order-2001\s+checkout\s+stuck\s+charge\s+1\s+expired \d+s ago/);
    expect(lines[2]).toMatch(/acme\s+order-1003\s+checkout\s+in flight\s+create_order\s+1\s+\d+m \d+s left/);
    expect(lines[6]).toMatch(/acme\s+order-1001\s+checkout\s+completed\s+record_charge\s+1\s+-/);
    expect(lines.at(-1)).toBe("6 keys");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
    expect(r.list?.stdout).not.toMatch(ANSI);
  });

  it("--json prints one documented object per line", () => {
    const rows = jsonLines(r.listJson?.stdout ?? "");
    expect(rows).toHaveLength(6);
    expect(rows[2]).toEqual({
      tenantId: "globex",
      key: "order-2001",
      workflow: "checkout",
      status: "in_flight",
      parkedReason: null,
      stuck: true,
      recoveryPoint: "charge",
      attempts: 1,
      leaseRemainingMs: expect.any(Number),
      ageMs: expect.any(Number),
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updatedAt: expect.any(String),
      expiresAt: null,
      expired: false,
      tombstoneUntil: null,
      waitingFor: null,
      wakeAt: null,
      wakesInMs: null,
      signalDelivered: null,
    });
    expect(rows[2]?.leaseRemainingMs).toBeLessThan(0);
  });

  it("filters by tenant, status, stuck and age", () => {
    expect(jsonLines(r.listAcmeInFlight?.stdout ?? "").map((k) => k.key)).toEqual([
      "order-1004",
      "order-1003",
      "order-1002",
    ]);
    expect(jsonLines(r.listStuck?.stdout ?? "").map((k) => `${k.tenantId}/${k.key}`)).toEqual([
      "globex/order-2001",
      "acme/order-1002",
    ]);
    expect(r.listOld).toMatchObject({ code: 0, stdout: "" });
  });

  it("pages with --limit and --cursor", async () => {
    const cursor = /--cursor (\S+)/.exec(r.listPage1?.stdout ?? "")?.[1];
    expect(r.listPage1?.stdout).toMatch(/^4 keys; next page: --cursor \S+$/m);
    expect(cursor).toBeDefined();
    const page2 = await idempo(["keys", "list", "--limit", "4", "--cursor", cursor as string, "--json"], {
      DATABASE_URL: seeded.url,
    });
    expect(jsonLines(page2.stdout).map((k) => `${k.tenantId}/${k.key}`)).toEqual([
      "globex/order-1001",
      "acme/order-1001",
    ]);
    expect(page2.stderr).toBe("");
  });
});

describe("keys stuck", () => {
  it("says where each stuck checkout stopped and what a retry does", () => {
    expect(r.stuck?.code).toBe(0);
    const out = r.stuck?.stdout ?? "";
    expect(out).toMatch(/^2 stuck keys \(in flight, lease expired\):/);
    expect(out).toMatch(
      /acme\s+order-1002\s+checkout\s+create_order\s+1\s+\d+s\s+\d+s\n {2}↳ lease expired \d+s ago at recovery point create_order, in step charge \(started, result unknown\)\n {4}retry: take over as attempt 2 and resume after create_order: call step charge again with the/,
    );
    expect(out).toMatch(/↳ lease expired \d+s ago at recovery point charge \(next: phase record_charge, not started\)/);
    expect(out).not.toContain("order-1003"); // live lease: not stuck
    for (const line of out.split("\n")) expect(line.length).toBeLessThanOrEqual(100);
  });

  it("--json adds the reason and the retry decision", () => {
    const [globex, acme] = jsonLines(r.stuckJson?.stdout ?? "");
    expect(acme).toMatchObject({
      tenantId: "acme",
      key: "order-1002",
      stuck: true,
      reason: expect.stringMatching(
        /^lease expired \d+s ago at recovery point create_order, in step charge \(started, result unknown\)$/,
      ),
      inDoubtStep: "charge",
      retry: { action: "take_over", attempt: 2, resumeAfter: "create_order", next: "step:charge" },
    });
    expect(globex).toMatchObject({
      key: "order-2001",
      inDoubtStep: null,
      retry: { resumeAfter: "charge", next: "phase:record_charge" },
    });
  });
});

describe("keys show", () => {
  it("shows a crashed checkout's timeline and that a retry takes over and calls charge again", () => {
    expect(r.showStuck?.code).toBe(0);
    const out = r.showStuck?.stdout ?? "";
    expect(out).toMatch(/^acme \/ order-1002 {2}checkout {2}stuck\n/);
    expect(out).toMatch(/stopped +at recovery point create_order, in step charge \(started, result unknown\)/);
    expect(out).toMatch(
      /retry now +take over as attempt 2 and resume after create_order: call step charge again with\s+the same derived key idem_\S+/,
    );
    expect(out).toMatch(/✓ phase create_order {2}\? step charge {4}phase record_charge/);
    expect(out).toMatch(/1 +\d{4}-\d\d-\d\d [\d:.]+ +phase +create_order +1 +\d+ms +succeeded/);
    expect(out).toMatch(/2 +\d{4}-\d\d-\d\d [\d:.]+ +step +charge +1 +- +started, result unknown/);
    expect(out).toMatch(/derived key: idem_/);
    expect(out).toContain("hidden: input and state (--show-state)");
    expect(out).not.toContain("4500"); // the input's amount stays hidden
    for (const line of out.split("\n")) expect(line.length).toBeLessThanOrEqual(100);
  });

  it("--json has the history with durations and the retry decision, without state", () => {
    const show = JSON.parse(r.showStuckJson?.stdout ?? "null");
    expect(show).toMatchObject({
      tenantId: "acme",
      key: "order-1002",
      status: "in_flight",
      recoveryPoint: "create_order",
      definition: ["phase:create_order", "step:charge", "phase:record_charge"],
      inDoubtStep: "charge",
      retry: { action: "take_over", attempt: 2, resumeAfter: "create_order" },
      response: null,
    });
    expect(show.history).toMatchObject([
      { kind: "phase", name: "create_order", outcome: "succeeded", durationMs: expect.any(Number) },
      {
        kind: "step",
        name: "charge",
        outcome: "started",
        finishedAt: null,
        durationMs: null,
        derivedKey: expect.stringMatching(/^idem_/),
      },
    ]);
    expect(show).not.toHaveProperty("state");
    expect(show).not.toHaveProperty("input");
  });

  it("a live lease means 409 while its owner renews it, and a takeover only once the owner stops", () => {
    const text = (r.showLive?.stdout ?? "").replace(/\n\s+/g, " ");
    expect(text).toMatch(
      /retry now +409 key_in_progress while attempt 1 holds the lease, valid until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in \d+m \d+s\); a live owner's heartbeat keeps renewing it, so a retry takes over only once the owner stops .*: then it would take over as attempt 2 and resume after create_order: next step charge/,
    );
    expect(r.showLive?.stdout).toMatch(/lease +\d+m \d+s left/);
  });

  it("a completed key replays; bodies only on request", () => {
    const done = JSON.parse(r.showDoneJson?.stdout ?? "null");
    expect(done).toMatchObject({
      status: "completed",
      retry: { action: "replay", status: 201 },
      response: { status: 201, outcome: "succeeded" },
    });
    expect(done.response).not.toHaveProperty("body");
    const secrets = JSON.parse(r.showDoneSecrets?.stdout ?? "null");
    expect(secrets.response.body).toEqual({ orderId: "ord_order-1001", chargeId: expect.stringMatching(/^ch_/) });
    expect(secrets.input).toEqual({ amountCents: 1200 });
    expect(secrets.state).toMatchObject({ orderId: "ord_order-1001" });
  });

  it("an unknown key is an operational error", () => {
    expect(r.showMissing).toMatchObject({ code: 1, stdout: "" });
    expect(r.showMissing?.stderr).toBe(
      "idempo: no record for key 'no-such-key' in tenant 'acme' (never used, deleted, or swept and past its tombstone)\n",
    );
  });
});

describe("stats and sweep", () => {
  it("counts by workflow and status, with the stuck count", () => {
    // The age is however long the set-up took: on a loaded machine that can pass a minute.
    expect(r.stats?.stdout).toMatch(/checkout\s+in flight\s+4\s+2\s+0\s+(\d+[hm] )?\d+[sm]/);
    expect(r.stats?.stdout).toMatch(
      /in flight 4 \(2 stuck\), completed 2 \(0 past retention\), oldest in flight: (\d+[hm] )?\d+[sm] old/,
    );
    expect(JSON.parse(r.statsJson?.stdout ?? "null")).toMatchObject({
      inFlight: 4,
      completed: 2,
      stuck: 2,
      expired: 0,
    });
    expect(JSON.parse(r.sweepDry?.stdout ?? "null")).toEqual({ wouldDelete: 0 });
  });
});

describe("output rules", () => {
  it("colours only when forced, and never with NO_COLOR", () => {
    expect(r.forced?.stdout).toMatch(ANSI);
    expect(r.noColor?.stdout).not.toMatch(ANSI);
    expect(r.noColor?.stdout).toContain("stuck");
  });

  it("migrate --print shows the pending SQL for a schema that has none", () => {
    expect(r.printOther?.code).toBe(0);
    expect(r.printOther?.stdout).toMatch(
      new RegExp(`^-- idempo: ${MIGRATIONS.length} pending migrations for schema other\nBEGIN;`),
    );
    expect(r.printOther?.stdout).toContain(
      `INSERT INTO "other".schema_migrations (version, name) VALUES (1, '0001_runs');`,
    );
    expect(r.printOther?.stdout).toMatch(/CREATE TABLE runs \(/);
    expect(r.printOther?.stdout.trimEnd().endsWith("COMMIT;")).toBe(true);
  });
});

describe("exit codes", () => {
  it("changes without --yes off a terminal are usage errors that change nothing", () => {
    expect(r.releaseNoYes?.code).toBe(2);
    expect(r.releaseNoYes?.stderr).toMatch(/needs --yes when not run on a terminal/);
    expect(r.releaseNoYes?.stderr).toMatch(/Usage: idempo keys release \[options\] <tenant> <key>/);
    expect(r.showLive?.stdout).toMatch(/\d+m \d+s left/);
  });

  it("bad arguments exit 2 with the command's help", async () => {
    const cases = await Promise.all([
      idempo(["keys", "list", "--limit", "0"]),
      idempo(["keys", "show", "acme"]),
      idempo(["keys", "frobnicate"]),
      idempo(["keys", "list", "--older-than", "soon"]),
      idempo(["keys", "list"]), // no DATABASE_URL
    ]);
    for (const c of cases) {
      expect(c.code).toBe(2);
      expect(c.stderr).toMatch(/Usage: idempo/);
      expect(c.stdout).toBe("");
    }
    expect(cases[0]?.stderr).toMatch(/--limit <n>' argument '0' is invalid. must be an integer from 1 to 1000/);
    expect(cases[1]?.stderr).toMatch(/missing required argument 'key'/);
    expect(cases[3]?.stderr).toMatch(/must be a duration such as 90s, 10m/);
    expect(cases[4]?.stderr).toMatch(/no database: pass --database-url or set DATABASE_URL/);
  });

  // No clock: a command that kept retrying would be killed by the helper's timeout and exit without code 1.
  it("an unreachable database exits 1 with one clear line", async () => {
    const port = await closedPort();
    const res = await idempo(["keys", "stuck", "--database-url", `postgres://app:secret@127.0.0.1:${port}/shop`]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(`idempo: cannot connect to the database at 127.0.0.1:${port}: connection refused\n`);
    expect(res.stderr).not.toContain("secret");
  });

  it("--help exits 0 with examples", async () => {
    const res = await idempo(["keys", "show", "--help"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/Usage: idempo keys show \[options\] <tenant> <key>/);
    expect(res.stdout).toMatch(/Examples:\n {2}\$ idempo keys show acme order-1002/);
  });
});

describe("changing records", () => {
  const env = () => ({ DATABASE_URL: seeded.url });

  it("release expires a live lease now, so a retry takes over", async () => {
    const res = await idempo(["keys", "release", "acme", "order-1004", "--yes"], env());
    expect(res.code).toBe(0);
    const flat = res.stdout.replace(/\n {2}/g, " ");
    expect(flat).toMatch(
      /^released acme\/order-1004: lease was \d+m \d+s left, now expired \(owner \w+\); that owner's next/,
    );
    expect(flat).toMatch(/a retry now will take over as attempt 2 and resume after create_order/);
    const rec = await seeded.engine.inspect("acme", "order-1004");
    expect(rec?.leaseRemainingMs).toBeLessThanOrEqual(0);
  });

  it("release of a completed key is an operational error", async () => {
    const res = await idempo(["keys", "release", "acme", "order-1001", "--yes"], env());
    expect(res).toMatchObject({ code: 1, stdout: "" });
    expect(res.stderr).toMatch(/is completed: only in-flight keys have a lease/);
  });

  it("resume finishes every stale checkout from its recovery point", async () => {
    const res = await idempo(["resume", "--workflows", "test/fixtures/checkout-workflow.ts", "--json"], env());
    expect(res.code).toBe(0);
    const runs = jsonLines(res.stdout).map((x) => `${x.tenantId}/${x.key} ${x.result} ${x.status}`);
    expect(runs.sort()).toEqual([
      "acme/order-1002 finished 201",
      "acme/order-1004 finished 201",
      "globex/order-2001 finished 201",
    ]);
    const resumed = await seeded.engine.inspect("acme", "order-1002");
    expect(resumed).toMatchObject({ status: "completed", attempt: 2, recoveryPoint: "record_charge" });
    expect(resumed?.history?.map((h) => `${h.kind}:${h.name}:${h.attempt}:${h.outcome}`)).toEqual([
      "phase:create_order:1:succeeded",
      "step:charge:1:interrupted",
      "step:charge:2:succeeded",
      "phase:record_charge:2:succeeded",
    ]);
    expect((await seeded.engine.inspect("acme", "order-1003"))?.status).toBe("in_flight"); // live lease: left alone
  });

  it("outbox list shows the receipts the finished runs queued", async () => {
    const res = await idempo(["outbox", "list", "--json"], env());
    const msgs = jsonLines(res.stdout);
    expect(msgs).toHaveLength(5);
    expect(new Set(msgs.map((m) => m.topic))).toEqual(new Set(["receipt.email"]));
    expect(msgs[0]).toMatchObject({ status: "pending", attempts: 0, deliveredAt: null });
  });

  it("delete forgets a key and says what it removed", async () => {
    const res = await idempo(["keys", "delete", "globex", "order-1001", "--yes"], env());
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      "deleted globex/order-1001 (checkout, completed, recovery point record_charge) and its history: a reuse of the key runs again\n",
    );
    expect(await seeded.engine.inspect("globex", "order-1001")).toBeNull();
    expect(await seeded.engine.inspect("acme", "order-1001")).not.toBeNull(); // same key, other tenant
  });

  it("migrate applies to a new schema once", async () => {
    const first = await idempo(["migrate", "--schema", "ops_copy"], env());
    expect(first).toMatchObject({
      code: 0,
      stdout: `applied ${MIGRATIONS.length} migrations to schema ops_copy:\n${MIGRATIONS.map((m) => `  ${m}\n`).join("")}`,
    });
    const again = await idempo(["migrate", "--schema", "ops_copy", "--json"], env());
    expect(JSON.parse(again.stdout)).toEqual({ applied: [] });
  });
});
