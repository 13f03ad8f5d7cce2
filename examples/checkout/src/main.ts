/**
 * The checkout demo: one idempotency key, five requests, one charge.
 *
 * A first attempt crashes after the provider charged the card but before
 * the charge was recorded. The retries that follow show the claim state
 * machine: 409 while the crashed attempt's lease runs, a takeover that
 * resumes after the last recovery point, a replay, and a 422 for a changed
 * request. The run ends with a table of counts and exits 1 if one is wrong.
 *
 *   pnpm start                                      # embedded PGlite, in memory
 *   DATABASE_URL=postgres://... pnpm start          # a PostgreSQL server
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { createEngine, IdempotencyKeyInProgressError, IdempotencyKeyMismatchError } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { checkoutWorkflow } from "./checkout.js";
import { openDatabase } from "./database.js";
import { heading, say, shortKey, showRecord, showResult } from "./narrate.js";
import { countOrders, createOrdersTable } from "./orders.js";
import { FakePaymentProvider } from "./payments.js";
import { printSummary } from "./summary.js";

/** Short, so the demo does not keep you waiting; production leases are longer (Default: 30 s). */
const LEASE_MS = 1000;
const TENANT = "acme";

/** A step of the story did not go as described. */
class DemoFailure extends Error {}

function expect(condition: boolean, what: string): void {
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

async function main(): Promise<boolean> {
  const { db, label } = await openDatabase(process.env.DATABASE_URL);
  try {
    const engine = createEngine({ db, leaseMs: LEASE_MS });
    await engine.migrate();
    await createOrdersTable(db);
    const payments = new FakePaymentProvider();
    const checkout = checkoutWorkflow(payments);

    // Fresh names per run, so the demo can run again on the same database.
    const id = randomUUID().slice(0, 8);
    const key = `checkout-${id}`;
    const input = { cartId: `cart-${id}`, amountCents: 4999 };
    const request = { tenantId: TENANT, key, input };
    console.log(`idempo checkout demo on ${label}, lease ${LEASE_MS} ms`);
    console.log(`tenant '${TENANT}', idempotency key '${key}', input ${JSON.stringify(input)}`);

    heading(1, "First attempt: the provider charges the card, then the process dies before the charge is recorded");
    setFaultHook(engine, (point) => {
      if (point === "called:step:charge") throw new CrashSignal(point);
    });
    const crash = await rejection(engine.runOnce(checkout, request), CrashSignal);
    setFaultHook(engine, undefined);
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
    expect(first.status === 201 && !first.replayed, "the takeover should answer a fresh 201");
    const done = await engine.inspect(TENANT, key);
    showRecord(done);
    for (const r of payments.requests) say(`provider: key ${shortKey(r.idempotencyKey)} -> ${r.outcome}`);

    heading(4, "A later retry of the same request");
    const replay = await engine.runOnce(checkout, request);
    showResult(replay);
    expect(replay.replayed && isDeepStrictEqual(replay.body, first.body), "the retry should replay the stored 201");
    say("answered from the stored record: no phase or step ran again");

    heading(5, "The same key with a different amount");
    const changed = { ...request, input: { ...input, amountCents: 5999 } };
    const mismatch = await rejection(engine.runOnce(checkout, changed), IdempotencyKeyMismatchError);
    say(`-> ${mismatch.httpStatus} ${mismatch.code}: ${mismatch.message}`);

    const orders = await countOrders(db, TENANT, input.cartId);
    const keysSent = new Set(payments.requests.map((r) => r.idempotencyKey));
    return printSummary([
      { what: "attempts", expected: 2, actual: (await engine.inspect(TENANT, key))?.attempt ?? 0 },
      { what: "provider calls", expected: 2, actual: payments.requests.length },
      { what: "keys sent to the provider", expected: 1, actual: keysSent.size },
      { what: "charges made", expected: 1, actual: payments.chargesMade },
      { what: "orders written", expected: 1, actual: orders.written },
      { what: "orders paid", expected: 1, actual: orders.paid },
    ]);
  } finally {
    await db.destroy();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error(error instanceof DemoFailure ? `\nDEMO FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
