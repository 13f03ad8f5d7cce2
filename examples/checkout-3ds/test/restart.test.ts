/**
 * The 3-D Secure checkout on PostgreSQL with its workers in processes of
 * their own, killed (SIGKILL) and replaced while the runs wait: the web
 * process here takes the orders and the provider's webhooks, the worker
 * processes resume what becomes due. However the workers come and go, the
 * confirmed order is captured once, the other is voided once after its
 * timeout, and the provider's repeated webhook counts once.
 */
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { statusPath } from "../src/app.ts";
import { call } from "../src/client.ts";
import { createOrdersTable, orderStatuses } from "../src/orders.ts";
import { FakePsp } from "../src/psp.ts";
import { PspClient } from "../src/psp-client.ts";
import { checkout3ds } from "../src/workflow.ts";
import { type ShopServer, serveShop } from "./support/shop-server.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const clone = useClonedDatabase("idempo_3ds_t", { prepare: (db) => createOrdersTable(db) });
const TENANT = "acme";
const SECRET = "whsec_test";
/** Long on purpose: the confirmed order must never time out however slow the machine; the other's deadline is moved. */
const CONFIRM_TIMEOUT_MS = 15 * 60_000;

const psp = new FakePsp({ webhookSecret: SECRET });
let engine: Engine;
let shop: ShopServer | undefined;
let shopUrl = "";
let pspUrl = "";
const workers = new Set<ChildProcess>();

/** Start a worker process and wait until it is ready. */
async function startWorker(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@idempo/source", "src/worker-main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: clone.url,
      PSP_URL: pspUrl,
      CONFIRM_TIMEOUT_MS: String(CONFIRM_TIMEOUT_MS),
      WORKER_INTERVAL_MS: "200",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  workers.add(child);
  child.once("exit", () => workers.delete(child));
  let out = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes("worker ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`the worker exited (${code}) before it was ready: ${out}`)));
  });
  return child;
}

/** Kill a worker process at once, the way a crash or an OOM kill would, and wait until it is gone. */
async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGKILL");
  await exited;
}

/** Poll until `condition` holds; the bound only catches a hang (it is not a verdict on speed). */
async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what} never happened`);
}
const statusOf = async (key: string) => (await engine.inspect(TENANT, key))?.status;

beforeAll(async () => {
  pspUrl = await psp.start();
  engine = createEngine({ db: clone.db });
  const flow = checkout3ds(new PspClient(pspUrl), { confirmTimeoutMs: CONFIRM_TIMEOUT_MS });
  shop = await serveShop(engine, flow, psp, SECRET);
  shopUrl = shop.url;
});

afterAll(async () => {
  for (const child of workers) await kill(child);
  await shop?.close();
  await psp.close();
});

describe("checkout-3ds on PostgreSQL, workers killed while the runs wait", () => {
  it("captures the confirmed order once and voids the other once, across three worker processes", async () => {
    const id = crypto.randomUUID().slice(0, 8);
    const orders = [
      { key: `3ds-${id}-a`, input: { cartId: `cart-${id}-a`, amountCents: 4999 } },
      { key: `3ds-${id}-b`, input: { cartId: `cart-${id}-b`, amountCents: 2500 } },
    ] as const;
    const [a, b] = orders;
    const place = (o: (typeof orders)[number]) => call(shopUrl, "/checkouts", { key: o.key, json: o.input });

    const first = await startWorker();
    for (const o of orders) {
      const accepted = await place(o);
      expect(accepted.status).toBe(202);
      expect(accepted.headers.get("location")).toBe(statusPath(o.key));
      expect(accepted.body).toMatchObject({ status: "requires_action" });
      expect(await statusOf(o.key)).toBe("suspended");
    }
    const paymentOf = async (key: string) =>
      ((await engine.inspect(TENANT, key))?.state as { paymentId: string } | undefined)?.paymentId;
    const [paymentA, paymentB] = [await paymentOf(a.key), await paymentOf(b.key)];
    if (!paymentA || !paymentB) throw new Error("the authorize step should have recorded both payments");

    // A worker dies while both runs wait: they are rows, no process held them.
    await kill(first);
    expect((await place(a)).status).toBe(409);

    // The customer passes the challenge while no worker is alive; the provider repeats its webhook twice.
    const deliveries = await psp.confirm(paymentA, { repeats: 2 });
    expect(deliveries.map((d) => d.status)).toEqual([200, 200, 200]);
    expect(deliveries.map((d) => (d.body as { duplicate: boolean }).duplicate)).toEqual([false, true, true]);
    expect(await statusOf(a.key)).toBe("suspended");
    expect(psp.counts.captures).toBe(0);

    // A new worker process resumes the signalled run after its wait and captures.
    const second = await startWorker();
    await until(async () => (await statusOf(a.key)) === "completed", "the second worker finishing order A");
    expect(psp.counts.captures).toBe(1);
    expect(await statusOf(b.key)).toBe("suspended");

    // It dies too, while B still waits for a confirmation that never comes.
    await kill(second);
    // B's fifteen minutes pass: its deadline is moved to now on the database clock, as time would move it.
    await sql`UPDATE idempo.runs SET wake_at = now()
      WHERE tenant_id = ${TENANT} AND key = ${b.key} AND status = 'suspended'`.execute(clone.db);
    await startWorker();
    await until(async () => (await statusOf(b.key)) === "completed", "the third worker voiding order B");

    // The clients' retries get the final answers, replayed.
    const paid = await place(a);
    expect({ status: paid.status, replayed: paid.headers.get("idempotent-replayed") }).toEqual({
      status: 201,
      replayed: "true",
    });
    expect(paid.body).toMatchObject({ status: "paid", paymentId: paymentA });
    const voided = await place(b);
    expect(voided.status).toBe(402);
    expect(voided.body).toMatchObject({ status: "voided", paymentId: paymentB, code: "3ds_not_completed" });
    expect((await call(shopUrl, statusPath(a.key))).status).toBe(201);

    const signals = await sql<{ key: string; payload: unknown }>`
      SELECT key, payload FROM idempo.signals WHERE tenant_id = ${TENANT} AND key IN (${a.key}, ${b.key})
        AND fingerprint <> 'timed_out'
    `.execute(clone.db);
    const statuses = await orderStatuses(clone.db, TENANT, [a.input.cartId, b.input.cartId]);
    const records = await Promise.all(orders.map((o) => engine.inspect(TENANT, o.key)));
    expect({
      authorizations: psp.counts.authorizations,
      captures: psp.counts.captures,
      voids: psp.counts.voids,
      charged: psp.paymentsIn("captured"),
      signals: signals.rows.map((r) => r.key),
      orders: [statuses.get(a.input.cartId), statuses.get(b.input.cartId)],
      // Resuming after a wait is not a new attempt: no run was ever taken over.
      attempts: records.map((r) => r?.attempt),
    }).toEqual({
      authorizations: 2,
      captures: 1,
      voids: 1,
      charged: 1,
      signals: [a.key],
      orders: ["paid", "voided"],
      attempts: [1, 1],
    });
    expect(records[0]?.state).toMatchObject({ three_ds: { paymentId: paymentA, outcome: "succeeded" } });
    expect(records[1]?.state).toMatchObject({ three_ds: { outcome: "timed_out" } });
  });
});
