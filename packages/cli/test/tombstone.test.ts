/**
 * A key past retention within its tombstone's time: `keys show` says a
 * retry gets 410 (for the expired record before the sweep, and for the
 * tombstone after it, shown as such), the verbs that need a run refuse a
 * tombstone, `keys delete` removes one, and the console's page shows it.
 */
import type { TombstoneRecord } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { tombstonePage } from "../src/console/tombstone-page.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import type { CliResult } from "./support/cli.ts";
import { idempo } from "./support/cli.ts";

const clone = useClonedDatabase("idempo_cli_tomb", {
  pool: 2,
  prepare: async (db) => {
    const engine = createEngine({ db });
    for (const key of ["swept-1", "swept-2", "unswept-1"]) {
      await engine.runOnce(checkout, { tenantId: "acme", key, input: { amountCents: 100 } });
    }
    await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - interval '1 minute'
              WHERE key LIKE 'swept-%'`.execute(db);
    await engine.sweep();
    await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() - interval '1 minute'
              WHERE key = 'unswept-1'`.execute(db);
  },
});

let r: Record<string, CliResult> = {};
beforeAll(async () => {
  const run = (args: string[]) => idempo(args, { DATABASE_URL: clone.url });
  // Two at a time: the machine is small.
  const [show, showJson] = await Promise.all([
    run(["keys", "show", "acme", "swept-1"]),
    run(["keys", "show", "acme", "swept-1", "--json"]),
  ]);
  const [unswept, unsweptJson] = await Promise.all([
    run(["keys", "show", "acme", "unswept-1"]),
    run(["keys", "show", "acme", "unswept-1", "--json"]),
  ]);
  const [cancel, del] = await Promise.all([
    run(["keys", "cancel", "acme", "swept-1", "--yes"]),
    run(["keys", "delete", "acme", "swept-2", "--yes"]),
  ]);
  const afterDelete = await run(["keys", "show", "acme", "swept-2"]);
  r = { show, showJson, unswept, unsweptJson, cancel, del, afterDelete } as Record<string, CliResult>;
}, 600_000);

describe("keys show", () => {
  it("shows a swept key as its tombstone: 410 until when, how the run ended", () => {
    expect(r.show?.code).toBe(0);
    expect(r.show?.stdout).toMatch(/acme \/ swept-1\s+checkout\s+expired \(tombstone\)/);
    expect(r.show?.stdout).toMatch(/retry now\s+410 key_expired: the record is past retention/);
    expect(r.show?.stdout).toMatch(/outcome\s+succeeded/);
    expect(r.show?.stdout).toMatch(/only the tombstone is left/);
    const json = JSON.parse(r.showJson?.stdout ?? "{}");
    expect(json).toMatchObject({
      tenantId: "acme",
      key: "swept-1",
      workflow: "checkout",
      status: "expired",
      tombstone: true,
      outcome: "succeeded",
      retry: { action: "refuse_expired" },
    });
    expect(Date.parse(json.tombstoneUntil)).toBeGreaterThan(Date.now());
  });

  it("says the same of an expired record the sweeper has not reached yet", () => {
    expect(r.unswept?.code).toBe(0);
    expect(r.unswept?.stdout).toMatch(/retry now\s+410 key_expired: the record is past retention/);
    expect(r.unswept?.stdout).toMatch(/tombstone\s+until /);
    const json = JSON.parse(r.unsweptJson?.stdout ?? "{}");
    expect(json).toMatchObject({ status: "completed", expired: true, retry: { action: "refuse_expired" } });
    expect(Date.parse(json.tombstoneUntil)).toBeGreaterThan(Date.now());
  });
});

describe("verbs on a tombstone", () => {
  it("cancel refuses it; delete removes it, and the key is absent after", () => {
    expect(r.cancel?.code).not.toBe(0);
    expect(r.cancel?.stderr).toMatch(/has only its tombstone left .* nothing to cancel/);
    expect(r.del?.code).toBe(0);
    expect(r.del?.stdout).toMatch(/deleted the tombstone of acme\/swept-2 .* runs the workflow again as new/);
    expect(r.afterDelete?.code).not.toBe(0);
    expect(r.afterDelete?.stderr).toMatch(/no record for key 'swept-2'/);
  });
});

describe("console", () => {
  it("the run page of a tombstone says what a retry gets, with the key escaped (HTML and invisible characters)", () => {
    const record: TombstoneRecord = {
      status: "expired",
      tenantId: "acme",
      key: "<b>k</b>\u202E",
      workflow: "checkout",
      outcome: "failed",
      completedAt: new Date("2026-12-01T10:00:00Z"),
      expiresAt: new Date("2026-12-02T10:00:00Z"),
      expired: true,
      tombstoneUntil: new Date("2026-12-09T10:00:00Z"),
    };
    const page = String(tombstonePage(record));
    expect(page).toContain("&lt;b&gt;k&lt;/b&gt;\\u202E");
    expect(page).not.toContain("\u202E");
    expect(page).not.toContain("<b>k</b>");
    expect(page).toContain("410 key_expired");
    expect(page).toContain("2026-12-09T10:00:00Z");
    expect(page).toContain("failed");
  });
});
