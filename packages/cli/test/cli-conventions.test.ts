/**
 * End to end: the rules every `idempo` command keeps, with the real binary
 * against a real database seeded by real workflow runs (see
 * support/seed.ts): colours only when forced, `migrate --print`, and exit
 * codes (usage errors 2, operational errors 1, help 0). The commands that
 * need the database run once, concurrently, before the tests look at what
 * they printed.
 */
import { createServer } from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import type { CliResult } from "./support/cli.ts";
import { idempo, runAll } from "./support/cli.ts";
import { MIGRATIONS } from "./support/migrations.ts";
import { useSeededDatabase } from "./support/seed.ts";

const seeded = useSeededDatabase("idempo_cli_conventions");
const ANSI = /\u001b\[/;

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
  r = await runAll(seeded.url, {
    showLive: { args: ["keys", "show", "acme", "order-1003"] },
    releaseNoYes: { args: ["keys", "release", "acme", "order-1003"] },
    printOther: { args: ["migrate", "--print", "--schema", "other"] },
    forced: { args: ["keys", "list", "--stuck"], env: { FORCE_COLOR: "1" } },
    noColor: { args: ["keys", "list", "--stuck"], env: { FORCE_COLOR: "1", NO_COLOR: "1" } },
  });
}, 600_000); // bounded work (5 commands, 3 at a time); a loaded machine only makes it slower

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
