/**
 * `npm run demo -- --leave-stuck`: instead of the story, leave behind the
 * state that docs/cli.md walks through, so every `idempo` command can be
 * tried on real records:
 *
 * - `acme/order-1001`, `globex/order-1001`: completed checkouts; acme's
 *   receipt was mailed, globex's was refused by the mailer and is a dead
 *   letter in the outbox;
 * - `acme/order-1002`: crashed after the provider charged the card, before
 *   the charge was recorded; its lease (1 s) has expired: stuck, in doubt;
 * - `globex/order-2001`: crashed after the charge was recorded, before
 *   `record_charge`; lease expired: stuck;
 * - `acme/order-1003` (crashed after `create_order`, before the charge) and
 *   `acme/order-1004` (crashed the way order-1002 did), under a 10-minute
 *   lease: still in flight, a retry gets 409.
 *
 * The records live in a PGlite data directory (`.pglite/demo` at the
 * repository root, replaced on every run) or, when DATABASE_URL is set, on
 * that server (the demo's keys there are forgotten first). The payment
 * provider keeps its idempotency keys in a journal file, so `idempo resume`
 * in another process gets the charges the crashed attempts already made.
 */
import { mkdirSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Engine, RunOnceRequest } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { sql } from "kysely";
import { checkoutWorkflow } from "./checkout.js";
import { openDatabase } from "./database.js";
import { DEMO_PGLITE_DIR, PAYMENTS_JOURNAL } from "./demo-state.js";
import { RECEIPT_TOPIC } from "./mailer.js";
import { createOrdersTable } from "./orders.js";
import { FakePaymentProvider } from "./payments.js";

type CheckoutInput = { cartId: string; amountCents: number };
type Checkout = ReturnType<typeof checkoutWorkflow>;

/** Stuck runs: a lease that has run out by the time the demo exits. */
const SHORT_LEASE_MS = 1_000;
/** Runs still in flight: a lease long enough to try `idempo keys release` on them. */
const LONG_LEASE_MS = 10 * 60_000;
/** How long to wait for the relay and for the short leases to run out. */
const PATIENCE_MS = 15_000;

const request = (tenantId: string, n: number, amountCents: number): RunOnceRequest<CheckoutInput> => ({
  tenantId,
  key: `order-${n}`,
  input: { cartId: `demo-cart-${n}`, amountCents },
});

const COMPLETED = [request("acme", 1001, 4999), request("globex", 1001, 1250)];
const STUCK_IN_CHARGE = request("acme", 1002, 2500);
const STUCK_AFTER_CHARGE = request("globex", 2001, 8900);
const IN_FLIGHT_BEFORE_CHARGE = request("acme", 1003, 1999);
const IN_FLIGHT_IN_CHARGE = request("acme", 1004, 3100);
const ALL = [...COMPLETED, STUCK_IN_CHARGE, STUCK_AFTER_CHARGE, IN_FLIGHT_BEFORE_CHARGE, IN_FLIGHT_IN_CHARGE];

/** Run the checkout and crash it at `point`, the way a killed process stops. */
async function crashAt(engine: Engine, checkout: Checkout, req: RunOnceRequest<CheckoutInput>, point: string) {
  setFaultHook(engine, (at) => {
    if (at === point) throw new CrashSignal(at);
  });
  try {
    await engine.runOnce(checkout, req);
    throw new Error(`${req.tenantId}/${req.key} did not crash at ${point}`);
  } catch (error) {
    if (!(error instanceof CrashSignal)) throw error;
  } finally {
    setFaultHook(engine, undefined);
  }
}

/** Poll `condition` every 50 ms; fail with `what` after PATIENCE_MS. */
async function eventually(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${PATIENCE_MS} ms`);
    await sleep(50);
  }
}

/** On a server the demo may have run before: forget its keys and their orders, so the state is the documented one. */
async function forgetEarlierRun(engine: Engine, db: Parameters<typeof createOrdersTable>[0]): Promise<void> {
  for (const { tenantId, key, input } of ALL) {
    const record = await engine.inspect(tenantId, key);
    // Released first: a forget of a live lease may be refused.
    if (record?.status === "in_flight") await engine.release(tenantId, key);
    if (record) await engine.forget(tenantId, key);
    await sql`DELETE FROM orders WHERE tenant_id = ${tenantId} AND cart_id = ${input.cartId}`.execute(db);
  }
}

/** Leave the documented state behind; returns false when it did not come out as described. */
export async function leaveStuck(url: string | undefined): Promise<boolean> {
  if (!url) rmSync(DEMO_PGLITE_DIR, { recursive: true, force: true });
  mkdirSync(dirname(PAYMENTS_JOURNAL), { recursive: true });
  rmSync(PAYMENTS_JOURNAL, { force: true });
  const database = await openDatabase(url, url ? undefined : DEMO_PGLITE_DIR);
  try {
    const { db } = database;
    const engine = createEngine({ db, leaseMs: SHORT_LEASE_MS });
    const slow = createEngine({ db, leaseMs: LONG_LEASE_MS });
    await engine.migrate();
    await createOrdersTable(db);
    await forgetEarlierRun(engine, db);
    const checkout = checkoutWorkflow(new FakePaymentProvider({ journal: PAYMENTS_JOURNAL }));
    console.log(`idempo checkout demo, leaving stuck runs behind on ${database.label}`);

    for (const req of COMPLETED) await engine.runOnce(checkout, req);
    // The mailer accepts acme's receipt and refuses globex's: one dead letter to look at.
    const relay = engine.startRelay({
      handlers: {
        [RECEIPT_TOPIC]: (message) => {
          if (message.tenantId === "globex") throw new Error("mail server refused the recipient (550)");
        },
      },
      maxAttempts: 1,
      pollIntervalMs: 50,
    });
    try {
      const receipts = (await engine.listOutbox({ topic: RECEIPT_TOPIC, limit: 1000 })).filter((m) =>
        COMPLETED.some((r) => r.tenantId === m.tenantId && r.key === m.key),
      );
      await eventually(
        async () =>
          (await engine.listOutbox({ topic: RECEIPT_TOPIC, status: "pending", limit: 1000 })).every(
            (m) => !receipts.some((r) => r.messageId === m.messageId),
          ),
        "the relay should deliver or dead-letter both receipts",
      );
    } finally {
      await relay.stop();
    }

    await crashAt(engine, checkout, STUCK_IN_CHARGE, "called:step:charge");
    await crashAt(engine, checkout, STUCK_AFTER_CHARGE, "after:step:charge");
    await crashAt(slow, checkout, IN_FLIGHT_BEFORE_CHARGE, "after:phase:create_order");
    await crashAt(slow, checkout, IN_FLIGHT_IN_CHARGE, "called:step:charge");
    await eventually(async () => {
      const stuck = await Promise.all(
        [STUCK_IN_CHARGE, STUCK_AFTER_CHARGE].map((r) => engine.inspect(r.tenantId, r.key)),
      );
      return stuck.every((rec) => (rec?.leaseRemainingMs ?? 0) < 0);
    }, "the short leases should run out");

    const records = await Promise.all(ALL.map((r) => engine.inspect(r.tenantId, r.key)));
    const summary = records.map((rec, i) => {
      const req = ALL[i];
      const lease = rec?.leaseRemainingMs == null ? "" : rec.leaseRemainingMs < 0 ? ", lease expired" : ", lease live";
      return `  ${req?.tenantId}/${req?.key}: ${rec?.status ?? "absent"} at ${rec?.recoveryPoint ?? "-"}${lease}`;
    });
    console.log(summary.join("\n"));
    const ok =
      records.slice(0, 2).every((r) => r?.status === "completed") &&
      records.slice(2).every((r) => r?.status === "in_flight") &&
      records[2]?.recoveryPoint === "create_order" &&
      records[3]?.recoveryPoint === "charge";

    const where = url ? "export DATABASE_URL=<the same URL>" : `export IDEMPO_PGLITE=${DEMO_PGLITE_DIR}`;
    console.log(`
Now look at them with the CLI (docs/cli.md), from the repository root:
  ${where}
  pnpm idempo keys stuck
  pnpm idempo keys show acme order-1002
  pnpm idempo resume --workflows examples/checkout/src/workflows.ts`);
    if (!ok) console.error("\nDEMO FAILED: the records did not come out as described above");
    return ok;
  } finally {
    await database.close();
  }
}
