/**
 * The checkout demo: two checkouts that crash after the card was charged,
 * and still end with one order, one charge and one receipt each.
 *
 * The first attempt of the first checkout crashes after the provider charged
 * the card but before the charge was recorded. The retries that follow show
 * the claim state machine: 409 while the crashed attempt's lease runs, a
 * takeover that resumes after the last recovery point, a replay, and a 422
 * for a changed request. Receipts leave through the outbox, mailed by a
 * relay that runs for the whole demo. The second checkout crashes the same
 * way and nobody retries it: a background worker finishes it once its lease
 * runs out. The run ends with a table of counts over both checkouts and
 * exits 1 if one is wrong.
 *
 *   pnpm start                                      # embedded PGlite, in memory
 *   DATABASE_URL=postgres://... pnpm start          # a PostgreSQL server
 *   pnpm start --leave-stuck                        # stuck runs for the CLI instead (leave-stuck.ts)
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import type { Engine, RunOnceRequest } from "@idempo/core";
import { createEngine, IdempotencyKeyInProgressError, IdempotencyKeyMismatchError } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { z } from "zod";
import { checkoutWorkflow } from "./checkout.js";
import { openDatabase } from "./database.js";
import { leaveStuck } from "./leave-stuck.js";
import { FakeMailer, RECEIPT_TOPIC, receiptSchema } from "./mailer.js";
import { heading, say, shortKey, showRecord, showResult } from "./narrate.js";
import { countOrders, createOrdersTable } from "./orders.js";
import { FakePaymentProvider } from "./payments.js";
import { printSummary } from "./summary.js";

/** Short, so the demo does not keep you waiting; production leases are longer (Default: 30 s). */
const LEASE_MS = 1000;
/** How often the worker looks for runs whose lease ran out (Default: 5 s). */
const WORKER_INTERVAL_MS = 200;
/** How long to wait for what happens in the background: a receipt, the worker's takeover. */
const PATIENCE_MS = 10_000;
const TENANT = "acme";

type CheckoutInput = { cartId: string; amountCents: number };

/** The part of a run's state that names its order. */
const placed = z.object({ orderId: z.string() });

/** What the scenes share. */
interface Demo {
  readonly engine: Engine;
  readonly checkout: ReturnType<typeof checkoutWorkflow>;
  readonly payments: FakePaymentProvider;
  readonly mailer: FakeMailer;
}

/** A step of the story did not go as described. */
class DemoFailure extends Error {}

function expect(condition: boolean, what: string): asserts condition {
  if (!condition) throw new DemoFailure(what);
}

/** Await a promise that should reject with an instance of `type`; return that error. */
async function rejection<E>(promise: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof type) return error;
    throw new DemoFailure(`expected ${type.name}, got ${String(error)}`);
  }
  throw new DemoFailure(`expected ${type.name}, but the call succeeded`);
}

/** Check `condition` every 20 ms until it holds; fail with `what` after PATIENCE_MS. */
async function eventually(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new DemoFailure(`${what} within ${PATIENCE_MS} ms`);
    await sleep(20);
  }
}

/** A new key and cart, so the demo can run again on the same database. */
function freshRequest(amountCents: number): RunOnceRequest<CheckoutInput> {
  const id = randomUUID().slice(0, 8);
  return { tenantId: TENANT, key: `checkout-${id}`, input: { cartId: `cart-${id}`, amountCents } };
}

/** Run the checkout, and crash it after the provider charged the card, before the charge is recorded. */
async function crashAfterCharge({ engine, checkout }: Demo, request: RunOnceRequest<CheckoutInput>) {
  setFaultHook(engine, (point) => {
    if (point === "called:step:charge") throw new CrashSignal(point);
  });
  try {
    return await rejection(engine.runOnce(checkout, request), CrashSignal);
  } finally {
    setFaultHook(engine, undefined);
  }
}

/** Print what the provider saw for one order. */
function showProvider({ payments }: Demo, orderId: string): void {
  for (const r of payments.requestsFor(orderId)) say(`provider: key ${shortKey(r.idempotencyKey)} -> ${r.outcome}`);
}

/** Wait until the relay has mailed the receipt of `orderId`, and print it. */
async function showReceipt({ mailer }: Demo, orderId: string): Promise<void> {
  await eventually(() => mailer.receiptsFor(orderId) > 0, `no receipt was mailed for ${orderId}`);
  say(`mailer: receipt for ${orderId}, delivery key ${shortKey(mailer.keyFor(orderId) ?? "")}`);
}

/** The outbox messages queued by one key's run. */
async function outboxOf({ engine }: Demo, key: string) {
  return (await engine.listOutbox({ tenantId: TENANT, topic: RECEIPT_TOPIC, limit: 1000 })).filter(
    (m) => m.key === key,
  );
}

/** Parts 1-5: one key, five requests. Returns the order's id. */
async function retriedCheckout(demo: Demo, request: RunOnceRequest<CheckoutInput>): Promise<string> {
  const { engine, checkout, payments, mailer } = demo;
  const { key, input } = request;

  heading(1, "First attempt: the provider charges the card, then the process dies before the charge is recorded");
  const crash = await crashAfterCharge(demo, request);
  say(`crashed at '${crash.point}'; provider charges so far: ${payments.chargesMade}`);
  const afterCrash = await engine.inspect(TENANT, key);
  showRecord(afterCrash);
  expect(afterCrash?.recoveryPoint === "create_order", "the order should be committed as the recovery point");
  say("the order is committed; 'charge' started but has no recorded result, so it is in doubt");

  heading(2, "The client retries at once, while the crashed attempt's lease is still valid");
  const busy = await rejection(engine.runOnce(checkout, request), IdempotencyKeyInProgressError);
  say(`-> ${busy.httpStatus} ${busy.code}, retryAfterMs ${busy.retryAfterMs} (database clock)`);

  heading(3, "The client waits retryAfterMs and retries: this attempt takes over and resumes after 'create_order'");
  say(`waiting ${busy.retryAfterMs} ms (an operator could end the lease at once with engine.release(tenant, key))`);
  await sleep(busy.retryAfterMs + 50);
  const first = await engine.runOnce(checkout, request);
  showResult(first);
  expect(
    first.outcome === "succeeded" && first.status === 201 && !first.replayed,
    "the takeover should answer a fresh 201",
  );
  const { orderId } = first.body;
  showRecord(await engine.inspect(TENANT, key));
  showProvider(demo, orderId);
  await showReceipt(demo, orderId);
  say("'record_charge' queued the receipt in its transaction; the relay mailed it once that committed");

  heading(4, "A later retry of the same request");
  const replay = await engine.runOnce(checkout, request);
  showResult(replay);
  expect(replay.replayed && isDeepStrictEqual(replay.body, first.body), "the retry should replay the stored 201");
  const queued = await outboxOf(demo, key);
  say(`answered from the stored record: no phase or step ran again, so nothing new was queued`);
  say(`outbox messages for this key: ${queued.length}; receipts mailed for the order: ${mailer.receiptsFor(orderId)}`);

  heading(5, "The same key with a different amount");
  const changed = { ...request, input: { ...input, amountCents: 5999 } };
  const mismatch = await rejection(engine.runOnce(checkout, changed), IdempotencyKeyMismatchError);
  say(`-> ${mismatch.httpStatus} ${mismatch.code}: ${mismatch.message}`);
  return orderId;
}

/** Part 6: a checkout whose client never comes back, finished by a worker. Returns the order's id. */
async function abandonedCheckout(demo: Demo, request: RunOnceRequest<CheckoutInput>): Promise<string> {
  const { engine, checkout } = demo;
  const { key } = request;

  heading(6, "Nobody retried: a second checkout crashes the same way, and its client never comes back");
  say(`idempotency key '${key}', input ${JSON.stringify(request.input)}`);
  const crash = await crashAfterCharge(demo, request);
  say(`crashed at '${crash.point}'`);
  const before = await engine.inspect(TENANT, key);
  showRecord(before);
  expect(before?.recoveryPoint === "create_order", "the order should be committed as the recovery point");
  const { orderId } = placed.parse(before?.state);

  say(`a worker (engine.startWorker) looks every ${WORKER_INTERVAL_MS} ms for runs whose lease ran out`);
  const startedAt = Date.now();
  const worker = engine.startWorker({ workflows: [checkout], intervalMs: WORKER_INTERVAL_MS });
  try {
    await eventually(
      async () => (await engine.inspect(TENANT, key))?.status === "completed",
      "the worker should finish the abandoned run",
    );
  } finally {
    await worker.stop();
  }
  say(`the worker took the run over and finished it after ${Date.now() - startedAt} ms; worker stopped`);
  const after = await engine.inspect(TENANT, key);
  showRecord(after);
  expect(after?.attempt === 2 && after.response?.status === 201, "the worker's attempt 2 should store the 201");
  showProvider(demo, orderId);
  await showReceipt(demo, orderId);
  return orderId;
}

async function main(): Promise<boolean> {
  const database = await openDatabase(process.env.DATABASE_URL);
  try {
    const { db } = database;
    const engine = createEngine({ db, leaseMs: LEASE_MS });
    await engine.migrate();
    await createOrdersTable(db);
    const payments = new FakePaymentProvider();
    const mailer = new FakeMailer();
    const demo: Demo = { engine, checkout: checkoutWorkflow(payments), payments, mailer };

    const requests = [freshRequest(4999), freshRequest(2500)] as const;
    console.log(`idempo checkout demo on ${database.label}, lease ${LEASE_MS} ms`);
    console.log(`tenant '${TENANT}', idempotency key '${requests[0].key}', input ${JSON.stringify(requests[0].input)}`);
    console.log(`a relay mails '${RECEIPT_TOPIC}' outbox messages, woken by LISTEN when a phase commits one`);

    // Started before the first run and stopped after the last: on PGlite, the
    // relay's LISTEN and UNLISTEN go to the connection the phases use.
    const relay = engine.startRelay({
      handlers: {
        [RECEIPT_TOPIC]: (message, { deliveryKey }) =>
          mailer.sendReceipt(receiptSchema.parse(message.payload), deliveryKey),
      },
      listen: database.listen,
      pollIntervalMs: 5_000, // only a fallback: LISTEN wakes the relay at once
      onError: (error) => say(`relay: ${String(error)}`),
    });
    let orderIds: string[];
    try {
      orderIds = [await retriedCheckout(demo, requests[0]), await abandonedCheckout(demo, requests[1])];
    } finally {
      await relay.stop();
    }

    const ours = payments.requests.filter((r) => orderIds.includes(r.orderId));
    const records = await Promise.all(requests.map((r) => engine.inspect(TENANT, r.key)));
    const orders = await Promise.all(requests.map((r) => countOrders(db, TENANT, r.input.cartId)));
    const queued = await Promise.all(requests.map((r) => outboxOf(demo, r.key)));
    const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
    console.log("\nRelay stopped. The counts cover both checkouts:");
    return printSummary([
      { what: "attempts", expected: 4, actual: sum(records.map((r) => r?.attempt ?? 0)) },
      { what: "provider calls", expected: 4, actual: ours.length },
      { what: "keys sent to the provider", expected: 2, actual: new Set(ours.map((r) => r.idempotencyKey)).size },
      { what: "charges made", expected: 2, actual: ours.filter((r) => r.outcome === "charged").length },
      { what: "orders written", expected: 2, actual: sum(orders.map((o) => o.written)) },
      { what: "orders paid", expected: 2, actual: sum(orders.map((o) => o.paid)) },
      { what: "receipts queued (outbox)", expected: 2, actual: sum(queued.map((q) => q.length)) },
      { what: "receipts sent", expected: 2, actual: sum(orderIds.map((id) => mailer.receiptsFor(id))) },
    ]);
  } finally {
    await database.close();
  }
}

try {
  const ok = process.argv.includes("--leave-stuck") ? await leaveStuck(process.env.DATABASE_URL) : await main();
  process.exitCode = ok ? 0 : 1;
} catch (error) {
  console.error(error instanceof DemoFailure ? `\nDEMO FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
