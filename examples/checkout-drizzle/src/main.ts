/**
 * The checkout with Drizzle: one checkout crashes after the card was
 * charged and before the charge was recorded, a retry takes over after the
 * crashed attempt's lease and finishes it, a duplicate replays, and the
 * receipt leaves through the outbox. It ends with the counts (one order,
 * paid; one charge; one receipt) and exits 1 if one is wrong. No Kysely is
 * installed: the phases write with Drizzle's transaction.
 *
 *   pnpm start                                      # Drizzle on PGlite, in memory
 *   DATABASE_URL=postgres://... pnpm start          # Drizzle on node-postgres
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { checkoutWorkflow } from "./checkout.js";
import { openDatabase } from "./database.js";
import { FakeMailer, RECEIPT_TOPIC, receiptSchema } from "./mailer.js";
import { countOrders, drizzleOrders } from "./orders.js";
import { FakePaymentProvider } from "./payments.js";

/** Short, so the story does not keep you waiting; production leases are longer (Default: 30 s). */
const LEASE_MS = 1000;
const TENANT = "acme";

const database = await openDatabase(process.env.DATABASE_URL);
const payments = new FakePaymentProvider();
const mailer = new FakeMailer();
const engine = createEngine({ db: database.data, leaseMs: LEASE_MS, listen: database.listen });
const checkout = checkoutWorkflow(payments, drizzleOrders);
const relay = engine.startRelay({
  handlers: {
    [RECEIPT_TOPIC]: async (message, { deliveryKey }) =>
      mailer.sendReceipt(receiptSchema.parse(message.payload), deliveryKey),
  },
});
let failed = false;
try {
  console.log(`idempo checkout with Drizzle on ${database.label}`);
  console.log(`migrations applied: ${(await engine.migrate()).length}`);
  const key = `order-${randomUUID().slice(0, 8)}`;
  const request = { tenantId: TENANT, key, input: { cartId: `cart-${key}`, amountCents: 4999 } };

  // The process "dies" after the provider charged the card, before the charge is recorded.
  setFaultHook(engine, (point) => {
    if (point === "called:step:charge") throw new CrashSignal(point);
  });
  await engine.runOnce(checkout, request).catch((error: unknown) => {
    if (!(error instanceof CrashSignal)) throw error;
    console.log("1. crashed after the charge, before recording it");
  });
  setFaultHook(engine, undefined);

  await sleep(LEASE_MS + 100);
  const retry = await engine.runOnce(checkout, request);
  console.log(`2. the retry took over after the lease: ${retry.status}, replayed ${retry.replayed}`);
  const again = await engine.runOnce(checkout, request);
  console.log(`3. a duplicate replays: ${again.status}, replayed ${again.replayed}`);

  const orderId = (retry.body as { orderId: string }).orderId;
  for (let i = 0; i < 500 && mailer.receiptsFor(orderId) === 0; i++) await sleep(20);
  const orders = await countOrders(database.db, TENANT, request.input.cartId);
  const counts = {
    orders: orders.written,
    paid: orders.paid,
    charges: payments.chargesMade,
    receipts: mailer.receiptsFor(orderId),
  };
  console.log(`counts: ${JSON.stringify(counts)}`);
  failed = Object.values(counts).some((n) => n !== 1) || !again.replayed;
  console.log(failed ? "FAILED: every count must be 1" : "every effect happened exactly once");
} finally {
  await relay.stop();
  await database.close();
}
process.exit(failed ? 1 : 0);
