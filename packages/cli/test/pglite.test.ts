/**
 * `--pglite DIR` (and `IDEMPO_PGLITE`): the real `idempo` binary on a PGlite
 * data directory that a crashed run left behind, from listing the stuck key
 * to resuming it with a `.ts` workflow module. PGlite allows one process per
 * data directory, so the commands run one after another.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { Kysely } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkout } from "./fixtures/checkout-workflow.ts";
import { payment } from "./fixtures/durable-workflows.ts";
import { idempo, jsonLines } from "./support/cli.ts";

const parent = mkdtempSync(join(tmpdir(), "idempo-cli-pglite-"));
const dir = join(parent, "data");
const LEASE_MS = 300;

beforeAll(async () => {
  const db = new Kysely<unknown>({ dialect: new PGliteDialect(await PGlite.create(dir)) });
  try {
    const engine = createEngine({ db, leaseMs: LEASE_MS });
    await engine.migrate();
    await engine.runOnce(checkout, { tenantId: "acme", key: "order-1001", input: { amountCents: 1200 } });
    setFaultHook(engine, (point) => {
      if (point === "called:step:charge") throw new CrashSignal(point);
    });
    await expect(
      engine.runOnce(checkout, { tenantId: "acme", key: "order-1002", input: { amountCents: 4500 } }),
    ).rejects.toBeInstanceOf(CrashSignal);
    setFaultHook(engine, undefined);
    // Two payments waiting for their confirmation; one of them has it.
    await engine.runOnce(payment, { tenantId: "acme", key: "pay-1", input: {} });
    await engine.runOnce(payment, { tenantId: "acme", key: "pay-2", input: {} });
    await engine.signal("acme", "pay-2", "confirmed", { ok: true });
    const deadline = Date.now() + 30_000;
    while (((await engine.inspect("acme", "order-1002"))?.leaseRemainingMs ?? 0) >= 0) {
      if (Date.now() > deadline) throw new Error("the crashed run's lease did not run out");
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await db.destroy();
  }
}, 600_000);

afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe("--pglite", () => {
  it("lists the stuck key of a PGlite data directory", async () => {
    const res = await idempo(["keys", "stuck", "--pglite", dir, "--json"], {}, 120_000);
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(jsonLines(res.stdout)).toMatchObject([
      { tenantId: "acme", key: "order-1002", inDoubtStep: "charge", retry: { action: "take_over", attempt: 2 } },
    ]);
  });

  it("lists suspended runs with what they wait for, and which signal arrived", async () => {
    const res = await idempo(["keys", "list", "--status", "suspended", "--pglite", dir, "--json"], {}, 120_000);
    expect(res.stderr).toBe("");
    expect(jsonLines(res.stdout)).toMatchObject([
      { key: "pay-2", waitingFor: { kind: "signal", name: "confirmed" }, signalDelivered: true },
      { key: "pay-1", waitingFor: { kind: "signal", name: "confirmed" }, signalDelivered: false },
    ]);
  });

  it("takes the directory from IDEMPO_PGLITE", async () => {
    const res = await idempo(["stats", "--json"], { IDEMPO_PGLITE: dir }, 120_000);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ inFlight: 1, completed: 1, stuck: 1 });
  });

  it("resumes the stuck run with a .ts workflow module", async () => {
    const res = await idempo(
      ["resume", "--workflows", "test/fixtures/checkout-workflow.ts", "--pglite", dir, "--json"],
      {},
      60_000,
    );
    expect(res.code).toBe(0);
    expect(jsonLines(res.stdout)).toEqual([
      {
        tenantId: "acme",
        key: "order-1002",
        workflow: "checkout",
        status: 201,
        outcome: "succeeded",
        was: "stale",
        result: "finished",
      },
    ]);
    const show = await idempo(["keys", "show", "acme", "order-1002", "--json"], { IDEMPO_PGLITE: dir }, 120_000);
    expect(JSON.parse(show.stdout)).toMatchObject({ status: "completed", attempts: 2 });
  });

  it("reports a directory that does not exist, and does not create it", async () => {
    const missing = join(parent, "no-such-dir");
    const res = await idempo(["keys", "list", "--pglite", missing]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `idempo: no PGlite data directory at ${missing}: check --pglite (\`idempo migrate\` creates one)\n`,
    );
    expect(existsSync(missing)).toBe(false);
  });

  it("refuses a server and a directory given together (usage error)", async () => {
    const res = await idempo(["keys", "list", "--pglite", dir, "--database-url", "postgres://u@127.0.0.1:1/x"]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/^error: both a server and a PGlite directory given/);
  });

  it("lets a flag win over the other option's environment variable", async () => {
    const res = await idempo(
      ["stats", "--json", "--pglite", dir],
      { DATABASE_URL: "postgres://u@127.0.0.1:1/x" },
      60_000,
    );
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ completed: 2 });
  });
});
