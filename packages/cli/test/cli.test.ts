/**
 * End to end: the real `idempo` binary against a real database seeded by
 * real workflow runs (see support/seed.ts), for the commands that report:
 * `keys list`, `keys stuck`, `keys show`, `stats` and `sweep --dry-run`.
 * They run once, concurrently, before the tests look at what they printed.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { CliResult } from "./support/cli.ts";
import { idempo, jsonLines, runAll } from "./support/cli.ts";
import { useSeededDatabase } from "./support/seed.ts";

const seeded = useSeededDatabase("idempo_cli");
const ANSI = /\u001b\[/;

let r: Record<string, CliResult>;
beforeAll(async () => {
  r = await runAll(seeded.url, {
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
    stats: { args: ["stats"] },
    statsJson: { args: ["stats", "--json"] },
    sweepDry: { args: ["sweep", "--dry-run", "--json"] },
  });
}, 600_000); // bounded work (17 commands, 3 at a time); a loaded machine only makes it slower

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
