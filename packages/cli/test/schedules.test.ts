/**
 * `idempo schedules list|show|pause|resume` through the real binary: the
 * table and the JSON say the same, pause and resume change the stored
 * schedule (resume from the first tick after now), and a missing schedule
 * or a missing --yes is refused without a change.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { idempo } from "./support/cli.ts";

let engine: Engine;
const clone = useClonedDatabase("idempo_cli_sched", {
  pool: 2,
  prepare: async (db) => {
    engine = createEngine({ db });
    const input = () => ({ amountCents: 100 });
    await engine.schedule("nightly-invoices", {
      cron: "0 2 * * *",
      timezone: "Europe/Berlin",
      workflow: checkout,
      tenantId: "acme",
      input,
    });
    await engine.schedule("hourly-sync", { cron: "0 * * * *", workflow: checkout, tenantId: "acme", input });
    await engine.pauseSchedule("hourly-sync");
    await sql`UPDATE idempo.schedules SET last_error = 'tick 2026-01-01T00:00:00.000Z: invalid input' WHERE name = 'nightly-invoices'`.execute(
      db,
    );
  },
});
const cli = (args: string[]) => idempo(args, { DATABASE_URL: clone.url }, 120_000);

describe("idempo schedules", { timeout: 300_000 }, () => {
  it("list prints every schedule by name with its state and next tick; --json the same fields", async () => {
    const res = await cli(["schedules", "list"]);
    expect(res.code).toBe(0);
    const lines = res.stdout.split("\n");
    expect(lines[0]).toMatch(/^NAME\s+TENANT\s+WORKFLOW\s+CRON\s+ZONE\s+STATE\s+NEXT TICK \(UTC\)/);
    expect(lines[1]).toMatch(/^hourly-sync\s+acme\s+checkout\s+0 \* \* \* \*\s+UTC\s+paused\s+-/);
    expect(lines[2]).toMatch(/^nightly-invoices\s+acme\s+checkout\s+0 2 \* \* \*\s+Europe\/Berlin\s+failing\s+in \d/);
    expect(lines[3]).toMatch(/last error: tick 2026-01-01T00:00:00.000Z: invalid input/);
    expect(res.stdout).toMatch(/2 schedules\n$/);

    const json = await cli(["schedules", "list", "--json"]);
    const rows = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((r) => [r.name, r.paused, r.timezone, r.hasInput])).toEqual([
      ["hourly-sync", true, "UTC", true],
      ["nightly-invoices", false, "Europe/Berlin", true],
    ]);
    const stored = (await engine.listSchedules()).find((s) => s.name === "nightly-invoices");
    expect(rows[1]?.nextTickAt).toBe(stored?.nextTickAt?.toISOString());
  });

  it("show prints one schedule field by field; an unknown name exits 1", async () => {
    const res = await cli(["schedules", "show", "nightly-invoices"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^schedule\s+nightly-invoices\n/);
    expect(res.stdout).toMatch(/\ncron\s+0 2 \* \* \* \(Europe\/Berlin\)\n/);
    expect(res.stdout).toMatch(/\ncatch-up\s+latest; a tick is missed once 1m late\n/);
    expect(res.stdout).toMatch(/\nnext tick\s+in .+ at \d{4}-\d\d-\d\dT\d\d:00:00Z\n/);
    const absent = await cli(["schedules", "show", "nope"]);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toMatch(/no schedule named 'nope'/);
  });

  it("a name no schedule can have is a usage error (exit 2), never echoed with its control characters", async () => {
    // `resume` shares its command with `pause`.
    for (const args of [["show"], ["pause", "--yes"]]) {
      const res = await cli(["schedules", ...args, "nightly\u001b[2J\u001b]0;owned\u0007"]);
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(/1 to 128 letters, digits, '\.', '_' or '-'/);
      expect(res.stderr).not.toMatch(/\u001b/);
    }
    expect((await engine.listSchedules()).find((s) => s.name === "nightly-invoices")?.paused).toBe(false);
  });

  it("pause and resume change the stored schedule; without --yes off a terminal nothing changes", async () => {
    const refused = await cli(["schedules", "pause", "nightly-invoices"]);
    expect(refused.code).toBe(2);
    expect((await engine.listSchedules()).find((s) => s.name === "nightly-invoices")?.paused).toBe(false);

    const paused = await cli(["schedules", "pause", "nightly-invoices", "--yes"]);
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(/^paused schedule nightly-invoices/);
    expect((await engine.listSchedules()).find((s) => s.name === "nightly-invoices")?.paused).toBe(true);
    const again = await cli(["schedules", "pause", "nightly-invoices", "--yes"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/is paused already/);

    const resumed = await cli(["schedules", "resume", "nightly-invoices", "--yes", "--json"]);
    expect(resumed.code).toBe(0);
    const after = JSON.parse(resumed.stdout) as { paused: boolean; nextTickAt: string };
    expect(after.paused).toBe(false);
    expect(Date.parse(after.nextTickAt)).toBeGreaterThan(Date.now() - 60_000);
  });
});
