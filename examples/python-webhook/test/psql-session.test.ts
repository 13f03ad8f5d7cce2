/**
 * The psql session of docs/sql-api.md, run: each ```psql block's input
 * lines (after the `idempo=#` and `idempo-#` prompts) go to `psql -a` on
 * a fresh database with the example's worker running, and what psql
 * prints (the input echoed, results and errors in order) must be the
 * block without its prompts. Between the blocks the test waits for what
 * the page says the worker does.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Engine, Worker } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { createBillingTables } from "../src/billing.ts";
import { invoicePayment } from "../src/workflow.ts";

const page = join(dirname(fileURLToPath(import.meta.url)), "../../../docs/sql-api.md");
const clone = useClonedDatabase("idempo_psql_t", { prepare: (db) => createBillingTables(db) });
const PROMPT = /^idempo[=-]\*?# /;

const hasPsql = spawnSync("psql", ["--version"], { stdio: "ignore" }).status === 0;
if (!hasPsql) console.warn("[psql-session] skipped: no psql on the PATH (Debian: apt-get install postgresql-client)");

/** The ```psql blocks of the page: what to type, and what psql prints for it. */
function sessionBlocks(): { input: string; expected: string }[] {
  const text = readFileSync(page, "utf8");
  return [...text.matchAll(/^```psql\n([\s\S]*?)^```$/gm)].map((m) => {
    const lines = (m[1] ?? "").replace(/\n$/, "").split("\n");
    return {
      input: `${lines
        .filter((l) => PROMPT.test(l))
        .map((l) => l.replace(PROMPT, ""))
        .join("\n")}\n`,
      expected: normalize(lines.map((l) => l.replace(PROMPT, "")).join("\n")),
    };
  });
}

/** Trailing spaces (psql pads its headers) and trailing blank lines do not count. */
function normalize(text: string): string {
  return text
    .split("\n")
    .map((l) => l.replace(/^psql:[^:]*:\d+: /, "").trimEnd())
    .join("\n")
    .replace(/\n+$/, "");
}

/** Run statements in one psql session; standard output and error in the order psql wrote them. */
async function psql(input: string): Promise<string> {
  const file = join(tmpdir(), `idempo-psql-${process.pid}-${Date.now()}.out`);
  const fd = openSync(file, "w");
  try {
    const child = spawn("psql", ["-X", "-a", "-P", "pager=off", "-v", "SHOW_CONTEXT=never", "-d", clone.url], {
      stdio: ["pipe", fd, fd],
      env: { ...process.env, PGOPTIONS: "-c timezone=UTC" },
    });
    child.stdin?.end(input);
    await new Promise<void>((resolve, reject) => {
      child.once("exit", () => resolve());
      child.once("error", reject);
    });
  } finally {
    closeSync(fd);
  }
  const out = readFileSync(file, "utf8");
  rmSync(file, { force: true });
  return normalize(out);
}

/** Poll until `condition` holds; the bound only catches a hang (it is not a verdict on speed). */
async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 4800; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting until ${what}`);
}

describe.skipIf(!hasPsql)("the psql session of docs/sql-api.md", () => {
  let engine: Engine;
  let worker: Worker;

  beforeAll(async () => {
    engine = createEngine({ db: clone.db });
    worker = engine.startWorker({ workflows: [invoicePayment], intervalMs: 100, sweep: false });
    await until(async () => {
      const { rows } = await sql`SELECT 1 FROM idempo.workflow_versions WHERE workflow = 'invoice_payment'`.execute(
        clone.db,
      );
      return rows.length === 1;
    }, "the worker registers invoice_payment");
  });
  afterAll(async () => {
    await worker?.stop();
  });

  it("prints what the page shows", async () => {
    const blocks = sessionBlocks();
    expect(blocks).toHaveLength(3);
    const [enqueue, signal, settled] = blocks as [(typeof blocks)[0], (typeof blocks)[0], (typeof blocks)[0]];

    expect(await psql(enqueue.input)).toBe(enqueue.expected);
    await until(
      async () => (await engine.inspect("acme", "inv-1001"))?.waitingFor?.name === "payment_result",
      "inv-1001 waits for its payment result",
    );
    await until(async () => (await engine.inspect("acme", "inv-1002"))?.status === "parked", "inv-1002 is parked");

    expect(await psql(signal.input)).toBe(signal.expected);
    await until(async () => (await engine.inspect("acme", "inv-1001"))?.status === "completed", "inv-1001 completes");

    expect(await psql(settled.input)).toBe(settled.expected);
  });
});
