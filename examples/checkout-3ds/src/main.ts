/**
 * The 3-D Secure checkout demo: two card payments that need the customer's
 * confirmation, which the provider reports by webhook, later.
 *
 * The first order's run authorizes the card and waits for the webhook: the
 * client gets 202 with the challenge URL, `Location` and `Retry-After`, and
 * a 409 when it retries. The worker is restarted while the run waits (it
 * holds nothing). The customer passes the challenge and the provider sends
 * its webhook three times; the first delivery signals the run, the repeats
 * count for nothing. A worker resumes the run and captures. The second
 * order's customer never confirms: after its timeout the worker voids it.
 * The run ends with a table of counts and exits 1 if one is wrong.
 *
 *   pnpm start                                      # embedded PGlite, in memory
 *   DATABASE_URL=postgres://... pnpm start          # a PostgreSQL server
 */
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServerType } from "@hono/node-server";
import { serve } from "@hono/node-server";
import type { Engine, RunRecord, TombstoneRecord, Worker } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { sql } from "kysely";
import { shopApp, statusPath } from "./app.js";
import type { Answer } from "./client.js";
import { call, describeAnswer } from "./client.js";
import type { DemoDatabase } from "./database.js";
import { openDatabase } from "./database.js";
import { createOrdersTable, orderStatuses } from "./orders.js";
import { FakePsp } from "./psp.js";
import { PspClient } from "./psp-client.js";
import { printSummary } from "./summary.js";
import type { Checkout3ds } from "./workflow.js";
import { checkout3ds } from "./workflow.js";

/** Short, so the second order's timeout comes quickly; a real one is minutes (Stripe's 3DS sessions last longer). */
const CONFIRM_TIMEOUT_MS = 3_000;
/** The longest a worker goes without looking for due runs when no NOTIFY wakes it. */
const WORKER_INTERVAL_MS = 250;
/** How long to wait for what happens in the background. */
const PATIENCE_MS = 30_000;
const TENANT = "acme";
const WEBHOOK_SECRET = "whsec_demo";

/** A step of the story did not go as described. */
class DemoFailure extends Error {}

function expect(condition: boolean, what: string): asserts condition {
  if (!condition) throw new DemoFailure(what);
}

function heading(n: number, text: string): void {
  console.log(`\n${n}. ${text}`);
}

function say(text: string): void {
  console.log(`   ${text}`);
}

function showRecord(rec: RunRecord | TombstoneRecord | null): void {
  if (!rec || rec.status === "expired") {
    say(`engine.inspect: ${rec ? "expired (tombstone)" : "no record"}`);
    return;
  }
  const waiting = rec.waitingFor
    ? `, waiting for ${rec.waitingFor.kind} '${rec.waitingFor.name}'${rec.waitingFor.until ? ` until ${rec.waitingFor.until.toISOString()}` : ""}`
    : "";
  say(`engine.inspect: ${rec.status}, recovery point '${rec.recoveryPoint ?? "(none)"}'${waiting}`);
}

/** Check `condition` every 25 ms until it holds; fail with `what` after PATIENCE_MS. */
async function eventually(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new DemoFailure(`${what} within ${PATIENCE_MS} ms`);
    await sleep(25);
  }
}

interface Demo {
  readonly engine: Engine;
  readonly database: DemoDatabase;
  readonly flow: Checkout3ds;
  readonly psp: FakePsp;
  readonly shopUrl: string;
}

function startWorker({ engine, flow, database }: Demo): Worker {
  return engine.startWorker({
    workflows: [flow],
    intervalMs: WORKER_INTERVAL_MS,
    listen: database.listen,
    onError: (error) => say(`worker: ${String(error)}`),
  });
}

const completed = (demo: Demo, key: string) => async () =>
  (await demo.engine.inspect(TENANT, key))?.status === "completed";

/** POST a new checkout; expects its 202 and returns it with the payment's id. */
async function placeOrder(demo: Demo, key: string, cartId: string, amountCents: number) {
  const answer = await call(demo.shopUrl, "/checkouts", { key, json: { cartId, amountCents } });
  say(`POST /checkouts -> ${describeAnswer(answer)}`);
  expect(answer.status === 202, "a checkout that needs 3-D Secure should answer 202");
  expect(answer.headers.get("location") === statusPath(key), "the 202 should point at the checkout's status");
  const record = await demo.engine.inspect(TENANT, key);
  showRecord(record);
  expect(record?.waitingFor?.name === "three_ds", "the run should wait for the 3-D Secure result");
  return { answer, paymentId: (record.state as { paymentId: string }).paymentId };
}

async function story(demo: Demo, worker: { current: Worker }): Promise<{ keys: string[]; carts: string[] }> {
  const { engine, psp, shopUrl } = demo;
  const id = randomUUID().slice(0, 8);
  const keys = [`3ds-${id}-1`, `3ds-${id}-2`];
  const carts = [`cart-${id}-1`, `cart-${id}-2`];
  const [keyA, keyB] = keys as [string, string];

  heading(1, "A card checkout: the provider authorizes the card and asks for 3-D Secure");
  const first = await placeOrder(demo, keyA, carts[0] as string, 4999);
  say(`the customer is sent to ${(first.answer.body as { challengeUrl: string }).challengeUrl}`);
  say("no process, connection or timer holds the run: it is one row with a deadline");

  heading(2, "The client retries at once, and asks the status URL");
  const retry = await call(shopUrl, "/checkouts", { key: keyA, json: { cartId: carts[0], amountCents: 4999 } });
  say(`POST /checkouts -> ${describeAnswer(retry)}`);
  expect(retry.status === 409, "a retry while the run waits should get 409");
  say(`GET ${statusPath(keyA)} -> ${describeAnswer(await call(shopUrl, statusPath(keyA)))}`);

  heading(3, "A deploy restarts the worker while the run waits");
  await worker.current.stop();
  worker.current = startWorker(demo);
  say("worker stopped and a new one started; the waiting run did not notice");

  heading(4, "The customer passes the challenge; the provider sends its webhook, then twice more");
  const deliveries = await psp.confirm(first.paymentId, { repeats: 2 });
  for (const d of deliveries) say(`POST /webhooks/psp -> ${d.status} ${JSON.stringify(d.body)}`);
  expect(
    deliveries.every((d) => d.status === 200),
    "every delivery should get a 2xx, so the provider stops retrying",
  );
  await eventually(completed(demo, keyA), "the worker should resume the run and capture");
  showRecord(await engine.inspect(TENANT, keyA));
  say(`provider: ${psp.payment(first.paymentId)?.status}; the worker resumed the run after the wait and captured`);
  const done = await call(shopUrl, statusPath(keyA));
  say(`GET ${statusPath(keyA)} -> ${describeAnswer(done)}`);
  const replay = await call(shopUrl, "/checkouts", { key: keyA, json: { cartId: carts[0], amountCents: 4999 } });
  say(`POST /checkouts (retry) -> ${describeAnswer(replay)}`);
  expect(replay.status === 201 && replay.headers.get("idempotent-replayed") === "true", "the retry should replay 201");

  heading(5, `A second checkout whose customer never confirms: voided after ${CONFIRM_TIMEOUT_MS} ms`);
  const second = await placeOrder(demo, keyB, carts[1] as string, 2500);
  await eventually(completed(demo, keyB), "the worker should void the run after its timeout");
  showRecord(await engine.inspect(TENANT, keyB));
  say(`provider: ${psp.payment(second.paymentId)?.status}; onTimeout let the run go on, and 'settle' voided`);
  const voided: Answer = await call(shopUrl, statusPath(keyB));
  say(`GET ${statusPath(keyB)} -> ${describeAnswer(voided)}`);
  expect(voided.status === 402, "the voided checkout should answer 402");
  return { keys, carts };
}

async function main(): Promise<boolean> {
  const database = await openDatabase(process.env.DATABASE_URL);
  const psp = new FakePsp({ webhookSecret: WEBHOOK_SECRET });
  let server: ServerType | undefined;
  const worker: { current?: Worker | undefined } = {};
  try {
    const { db } = database;
    const pspUrl = await psp.start();
    const flow = checkout3ds(new PspClient(pspUrl), { confirmTimeoutMs: CONFIRM_TIMEOUT_MS });
    // The webhook checks each signal against the run's version of the flow: the engine must have it from the start.
    const engine = createEngine({ db, workflows: [flow] });
    await engine.migrate();
    await createOrdersTable(db);
    const app = shopApp(engine, flow, { webhookSecret: WEBHOOK_SECRET });
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    const shopUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    psp.webhookUrl = `${shopUrl}/webhooks/psp`;
    const demo: Demo = { engine, database, flow, psp, shopUrl };
    console.log(`idempo 3-D Secure demo on ${database.label}; shop ${shopUrl}, provider ${pspUrl}`);
    // Started before the first run: on PGlite its LISTEN goes to the connection the phases use.
    worker.current = startWorker(demo);
    const { keys, carts } = await story(demo, worker as { current: Worker });
    await worker.current.stop();
    worker.current = undefined;

    const signals = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM idempo.signals WHERE tenant_id = ${TENANT} AND key IN (${sql.join(keys)})
        AND fingerprint <> 'timed_out' -- the marker of a wait that timed out (order B's) is not a signal
    `.execute(db);
    const statuses = await orderStatuses(db, TENANT, carts);
    const ours = [...statuses.values()];
    console.log("\nWorker stopped. The counts cover both checkouts:");
    return printSummary([
      { what: "cards authorized", expected: 2, actual: psp.counts.authorizations },
      { what: "webhook deliveries (all answered 2xx)", expected: 3, actual: psp.counts.webhookAcknowledged },
      { what: "3-D Secure signals kept", expected: 1, actual: signals.rows[0]?.n ?? 0 },
      { what: "charges (payments captured)", expected: 1, actual: psp.paymentsIn("captured") },
      { what: "orders paid", expected: 1, actual: ours.filter((s) => s === "paid").length },
      { what: "captures", expected: 1, actual: psp.counts.captures },
      { what: "voids", expected: 1, actual: psp.counts.voids },
      { what: "orders voided", expected: 1, actual: ours.filter((s) => s === "voided").length },
    ]);
  } finally {
    await worker.current?.stop();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await psp.close();
    await database.close();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error(error instanceof DemoFailure ? `\nDEMO FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
