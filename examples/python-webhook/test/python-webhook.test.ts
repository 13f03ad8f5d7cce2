/**
 * The Python billing service against a TypeScript worker, on the test
 * PostgreSQL: Python creates the invoice and enqueues its run through
 * `idempo.enqueue` (one transaction), the provider's webhook reaches the
 * Python handler twice at once and once more with another reference, and
 * the worker executes the run once: one payment request, the invoice paid
 * with the first reference, one signal kept.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Engine, Worker } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { createBillingTables } from "../src/billing.ts";
import { invoicePayment } from "../src/workflow.ts";
import { noPythonReason, python } from "./python.ts";

const here = join(dirname(fileURLToPath(import.meta.url)), "../python");
const clone = useClonedDatabase("idempo_pyhook_t", { prepare: (db) => createBillingTables(db) });
const TENANT = "acme";

if (!python) console.warn(`[python-webhook] skipped: ${noPythonReason}`);

/** Run one of the example's scripts to its end: exit code and standard output. */
async function runPython(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(python as string, args, {
    cwd: here,
    env: { ...process.env, DATABASE_URL: clone.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString("utf8");
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString("utf8");
  });
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stdout, stderr };
}

/** Start the webhook server on a free port; its URL once it accepts requests. */
async function startWebhook(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(python as string, ["webhook.py", "--port", "0"], {
    cwd: here,
    env: { ...process.env, DATABASE_URL: clone.url },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (c: Buffer) => {
      out += c.toString("utf8");
      const found = /listening on (http:\/\/\S+)/.exec(out);
      if (found?.[1]) resolve(found[1]);
    });
    child.once("exit", (code) => reject(new Error(`webhook.py exited (${code}) before it listened: ${out}`)));
  });
  return { child, url };
}

/** Poll until `condition` holds; the bound only catches a hang (it is not a verdict on speed). */
async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 4800; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting until ${what}`);
}

describe.skipIf(!python)("the Python billing service and a TypeScript worker", () => {
  let engine: Engine;
  let worker: Worker;
  let listen: pg.Client;
  let webhook: ChildProcess | undefined;

  beforeAll(async () => {
    listen = new pg.Client({ connectionString: clone.url });
    await listen.connect();
    engine = createEngine({ db: clone.db });
    worker = engine.startWorker({ workflows: [invoicePayment], intervalMs: 200, listen, sweep: false });
    await until(async () => {
      const { rows } = await sql`SELECT 1 FROM idempo.workflow_versions WHERE workflow = 'invoice_payment'`.execute(
        clone.db,
      );
      return rows.length === 1;
    }, "the worker registers invoice_payment");
  });
  afterAll(async () => {
    if (webhook && webhook.exitCode === null) {
      const exited = once(webhook, "exit");
      webhook.kill("SIGTERM");
      await exited;
    }
    await worker?.stop();
    await listen?.end();
  });

  it("enqueue and signal from Python start and finish the run once; a repeated webhook counts once", async () => {
    expect(await runPython(["enqueue.py", TENANT, "inv-1001", "4200"])).toMatchObject({
      code: 0,
      stdout: '{"created": true}\n',
    });
    expect(await runPython(["enqueue.py", TENANT, "inv-1001", "4200"])).toMatchObject({
      code: 0,
      stdout: '{"created": false}\n',
    });
    const other = await runPython(["enqueue.py", TENANT, "inv-1001", "4300"]);
    expect(other.code).toBe(1);
    expect(JSON.parse(other.stdout)).toMatchObject({ error: "key_mismatch", sqlstate: "IP004" });

    await until(
      async () => (await engine.inspect(TENANT, "inv-1001"))?.waitingFor?.name === "payment_result",
      "the run requested the payment and waits for its result",
    );

    const started = await startWebhook();
    webhook = started.child;
    const post = async (event: Record<string, string>) => {
      const res = await fetch(`${started.url}/webhooks/payments`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(event),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const paid = { tenant: TENANT, invoice: "inv-1001", status: "paid", reference: "pay_81" };
    // The provider is unsure its first delivery arrived and sends it again at once.
    const answers = await Promise.all([post(paid), post(paid)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers.map((a) => a.body.duplicate).sort()).toEqual([false, true]);
    expect(answers.filter((a) => a.body.woke === true)).toHaveLength(1);
    expect(await post({ ...paid, reference: "pay_82" })).toMatchObject({
      status: 422,
      body: { code: "key_mismatch", status: 422 },
    });
    expect(await post({ ...paid, invoice: "inv-9999" })).toMatchObject({
      status: 404,
      body: { code: "run_not_found" },
    });

    expect(await engine.wait(TENANT, "inv-1001", { timeoutMs: 120_000 })).toMatchObject({
      status: 200,
      body: { invoiceId: "inv-1001", status: "paid", reference: "pay_81" },
    });
    // A repeat after the run finished is still acknowledged.
    expect(await post(paid)).toMatchObject({ status: 200, body: { duplicate: true, woke: false } });

    const counts = await sql<{ requests: number; signals: number; invoice: string }>`
      SELECT (SELECT count(*)::int FROM payment_requests WHERE invoice_id = 'inv-1001') AS requests,
             (SELECT count(*)::int FROM idempo.signals WHERE key = 'inv-1001') AS signals,
             (SELECT status || ' ' || payment_reference FROM invoices WHERE id = 'inv-1001') AS invoice`.execute(
      clone.db,
    );
    expect(counts.rows[0]).toEqual({ requests: 1, signals: 1, invoice: "paid pay_81" });
  });
});
