/**
 * Operator output that misled (kind: operator output): keys that look the
 * same in a table, connection errors named after the wrong cause, the
 * API's words in a CLI message, message ids cut in the table that `outbox
 * retry` needs them from, help text past 100 columns. Each runs the real
 * binary against a real database.
 */
import { createServer } from "node:net";
import type { Engine } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { afterAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../testkit/src/index.ts";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { idempo, jsonLines } from "./support/cli.ts";

const LOOKALIKES = ["k", "k\u2028", "k\u200b", "k "];
const STUCK_KEY = "s\u2029";
const LONG_TENANT = `tenant-${"t".repeat(40)}`;
const LONG_KEY = `order-${"k".repeat(60)}`;
const note = workflow("note").respond(() => ({ status: 201, body: null }));

const clone = useClonedDatabase("idempo_cli_out", {
  pool: 4,
  prepare: async (db) => {
    const engine: Engine = createEngine({ db });
    for (const key of LOOKALIKES) await engine.runOnce(note, { tenantId: "t-esc", key, input: {} });
    await engine.runOnce(checkout, { tenantId: LONG_TENANT, key: LONG_KEY, input: { amountCents: 100 } });
    const short = createEngine({ db, leaseMs: 200 });
    setFaultHook(short, (point) => {
      if (point === "called:step:charge") throw new CrashSignal(point);
    });
    await short.runOnce(checkout, { tenantId: "t-esc", key: STUCK_KEY, input: { amountCents: 5 } }).catch((e) => {
      if (!(e instanceof CrashSignal)) throw e;
    });
    await new Promise((r) => setTimeout(r, 400));
  },
});
const run = (args: string[], url = clone.url) => idempo(args, { DATABASE_URL: url });

describe("keys and tenants that cannot be told apart when printed raw", () => {
  it("keys list escapes them, so k, k+U+2028, k+U+200B and 'k ' are four different rows; --json stays exact", async () => {
    const table = await run(["keys", "list", "--tenant", "t-esc"]);
    expect(table.code).toBe(0);
    const keys = table.stdout
      .split("\n")
      .slice(1)
      .filter((l) => l.startsWith("t-esc"))
      .map((l) => l.split(/\s{2,}/)[1]);
    expect(keys.sort()).toEqual(["k", "k\\u0020", "k\\u200B", "k\\u2028", "s\\u2029"].sort());
    expect(table.stdout).not.toMatch(/[\u2028\u2029\u200b]/);
    const json = jsonLines<{ key: string }>((await run(["keys", "list", "--tenant", "t-esc", "--json"])).stdout);
    expect(json.map((k) => k.key).sort()).toEqual([...LOOKALIKES, STUCK_KEY].sort());
  });

  it("keys show and keys stuck escape them too", async () => {
    const show = await run(["keys", "show", "t-esc", "k\u2028"]);
    expect(show.code).toBe(0);
    expect(show.stdout.split("\n")[0]).toMatch(/^t-esc \/ k\\u2028 {2}note/);
    const stuck = await run(["keys", "stuck", "--tenant", "t-esc"]);
    expect(stuck.stdout).toMatch(/t-esc\s+s\\u2029\s+checkout/);
    expect(stuck.stdout).not.toMatch(/[\u2028\u2029]/);
    const missing = await run(["keys", "show", "t-esc", "k\u200bx"]);
    expect(missing.stderr).toMatch(/no record for key 'k\\u200Bx'/);
  });
});

describe("connection errors name the real cause", () => {
  it("a role that does not exist is named, not 'authentication rejected'", async () => {
    const url = new URL(clone.url);
    url.username = "no_such_role_here";
    url.password = "";
    const res = await run(["keys", "list"], url.toString());
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/role "no_such_role_here" does not exist/);
    expect(res.stderr).not.toMatch(/authentication rejected/);
  });

  it("a connection that never opened is not 'lost'", async () => {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    try {
      const res = await run(["keys", "list"], `postgres://postgres@127.0.0.1:${port}/postgres`);
      expect(res.code).toBe(1);
      expect(res.stderr).toMatch(
        /cannot connect to the database at 127\.0\.0\.1:\d+: the server closed the connection/,
      );
      expect(res.stderr).not.toMatch(/lost the connection/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("messages in the CLI's words", () => {
  it("a bad --cursor names the option and where cursors come from, not the API", async () => {
    for (const command of [
      ["keys", "list"],
      ["keys", "stuck"],
    ]) {
      const res = await run([...command, "--cursor", "not-a-cursor"]);
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(/--cursor: not a cursor this command printed/);
      expect(res.stderr).not.toMatch(/listKeys/);
    }
  });
});

describe("outbox output", () => {
  it("outbox list never cuts the message id that outbox retry needs", async () => {
    const json = jsonLines<{ messageId: string }>((await run(["outbox", "list", "--json"])).stdout);
    const id = json[0]?.messageId as string;
    expect(id).toBeDefined();
    const table = await run(["outbox", "list"]);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain(id);
    for (const line of table.stdout.split("\n")) expect(line.length).toBeLessThanOrEqual(100);
  });

  it("outbox --help keeps to 100 columns like the rest", async () => {
    for (const args of [["outbox"], ["outbox", "retry"], ["outbox", "list"], ["keys"], []]) {
      const res = await run([...args, "--help"]);
      expect(res.code).toBe(0);
      for (const line of res.stdout.split("\n")) expect(line.length, line).toBeLessThanOrEqual(100);
    }
  });
});

afterAll(() => undefined);
