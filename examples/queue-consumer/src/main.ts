/**
 * An at-least-once queue consumer made safe with idempo.
 *
 * Order events arrive through a broker that redelivers a message whenever
 * its acknowledgement is lost. Each delivery is handled with
 * `engine.runOnce`, keyed by the message id, and the workflow's only phase
 * writes one ledger row for each (order_id, event_type) pair. Redeliveries
 * within retention are answered from the stored response. A dead-letter
 * replay that arrives after retention runs again, because idempo has
 * forgotten the message id by then, and the ledger's unique constraint
 * refuses the duplicate row.
 *
 * Ends with a check (ledger rows == distinct events) and exits 1 if wrong.
 *
 *   pnpm start
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import type { HandleResult, OrderEvent } from "./consumer.js";
import { applyOrderEvent, handleMessage, RETENTION_MS, TENANT } from "./consumer.js";
import { createLedger, ledgerRows, openDatabase } from "./database.js";
import type { Delivery } from "./queue.js";
import { AtLeastOnceQueue } from "./queue.js";
import { printChecks } from "./report.js";

/** Deliveries without an acknowledgement before the broker dead-letters a message. */
const MAX_DELIVERIES = 2;

/** A part of the story did not happen as the narrative says. */
class StoryError extends Error {}

function expect(condition: boolean, what: string): void {
  if (!condition) throw new StoryError(what);
}

function heading(n: number, text: string): void {
  console.log(`\n${n}. ${text}`);
}

function say(text: string): void {
  console.log(`   ${text}`);
}

/** What the consumer did, delivery by delivery. */
interface Tally {
  executed: number;
  replayed: number;
  rowsAdded: number;
  duplicatesRefused: number;
}

function describe(d: Delivery<OrderEvent>, res: HandleResult): string {
  const from = d.fromDeadLetters ? "from DLQ  " : `delivery ${d.deliveryCount}`;
  const event = `${d.message.body.type.padEnd(13)} ${d.message.body.orderId}`;
  const applied = res.outcome === "succeeded" ? String(res.body.applied) : "?";
  return `${d.message.id}  ${from}  ${event}  -> ${res.status} applied: ${applied.padEnd(5)} replayed: ${String(res.replayed).padEnd(5)}`;
}

/** Receive and handle until the queue is empty; acknowledge each delivery after its run answered. */
async function consume(engine: Engine, queue: AtLeastOnceQueue<OrderEvent>, tally: Tally): Promise<HandleResult[]> {
  const results: HandleResult[] = [];
  for (let d = queue.receive(); d; d = queue.receive()) {
    const res = await handleMessage(engine, d.message);
    results.push(res);
    if (res.replayed) tally.replayed++;
    else {
      tally.executed++;
      const applied = res.outcome === "succeeded" && res.body.applied;
      if (applied) tally.rowsAdded++;
      else tally.duplicatesRefused++;
    }
    const acked = queue.ack(d.message.id);
    const dead = !acked && queue.deadLetters.some((m) => m.id === d.message.id);
    say(`${describe(d, res)}  ${acked ? "ack" : dead ? "ack lost: dead-lettered" : "ack lost: will be redelivered"}`);
  }
  return results;
}

async function main(): Promise<boolean> {
  const db = await openDatabase();
  try {
    const engine = createEngine({ db });
    await engine.migrate();
    await createLedger(db);
    const queue = new AtLeastOnceQueue<OrderEvent>(MAX_DELIVERIES);
    const tally: Tally = { executed: 0, replayed: 0, rowsAdded: 0, duplicatesRefused: 0 };

    console.log("idempo queue-consumer example on embedded PGlite (in memory)");
    console.log(`workflow '${applyOrderEvent.name}', tenant '${TENANT}', retention ${RETENTION_MS} ms`);
    console.log(
      `idempotency key = message id; the broker dead-letters after ${MAX_DELIVERIES} unacknowledged deliveries`,
    );

    heading(1, "The publisher sends four order events");
    const events: OrderEvent[] = [
      { orderId: "o-1001", type: "order.placed", amountCents: 4999 },
      { orderId: "o-1001", type: "order.paid", amountCents: 4999 },
      { orderId: "o-1002", type: "order.placed", amountCents: 1250 },
      { orderId: "o-1002", type: "order.paid", amountCents: 1250 },
    ];
    const published = events.map((e) => queue.publish(e));
    for (const m of published) say(`${m.id}  ${m.body.type.padEnd(13)} ${m.body.orderId}  ${m.body.amountCents} cents`);
    const [, paid, placed] = published;
    if (!paid || !placed) throw new StoryError("the publisher lost a message");
    queue.loseAcks(paid.id, 1);
    queue.loseAcks(placed.id, MAX_DELIVERIES);
    say(`(the consumer will lose one ack of ${paid.id} and every ack of ${placed.id})`);

    heading(2, "The consumer handles every delivery with engine.runOnce, keyed by the message id");
    const first = await consume(engine, queue, tally);
    expect(
      first.filter((r) => r.replayed).length === 2,
      "both redeliveries should be answered from the stored response",
    );
    say("both redeliveries got the stored answer of their first delivery; the phase did not run again");
    expect(queue.deadLetters.length === 1, `${placed.id} should be in the dead-letter queue`);
    say(
      `dead-letter queue: ${queue.deadLetters.map((m) => m.id).join(", ")}; ledger rows: ${(await ledgerRows(db)).length}`,
    );

    heading(3, `Time passes: more than the ${RETENTION_MS} ms retention`);
    const before = await engine.inspect(TENANT, placed.id);
    await sleep(RETENTION_MS + 150);
    const expired = await engine.inspect(TENANT, placed.id);
    expect(expired?.expired === true, `the record of ${placed.id} should be past retention`);
    say(`engine.inspect('${placed.id}'): ${expired?.status}, expired: ${expired?.expired}`);
    say("the record is still in the table (nothing swept it), but the claim already treats the key as absent");

    heading(4, "An operator replays the dead-letter queue");
    say(`moved ${queue.replayDeadLetters()} message(s) back to the queue`);
    const [replay] = await consume(engine, queue, tally);
    expect(replay?.replayed === false, "the replay after retention should run the workflow again");
    const after = await engine.inspect(TENANT, placed.id);
    expect(after?.runId !== before?.runId, "the replay should have started a new run");
    say(`idempo ran the workflow again as a new run (run id ${before?.runId} -> ${after?.runId})`);
    if (replay?.outcome === "succeeded" && !replay.body.applied) {
      say("the INSERT ... ON CONFLICT (order_id, event_type) DO NOTHING added no row: applied: false");
    } else {
      say("the phase added a second ledger row for the same event (see the check below)");
    }

    heading(5, "The sweeper reclaims the space of expired records");
    await sleep(RETENTION_MS + 50);
    say(
      `engine.sweep() deleted ${await engine.sweep({ batchSize: 100 })} expired record(s); the ledger keeps its rows`,
    );

    const rows = await ledgerRows(db);
    const distinct = new Set(events.map((e) => `${e.orderId} ${e.type}`));
    const inLedger = new Set(rows.map((r) => `${r.orderId} ${r.eventType}`));
    const missing = [...distinct].filter((e) => !inLedger.has(e));
    console.log("\nLedger:");
    for (const r of rows) say(`${r.orderId}  ${r.eventType.padEnd(13)} applied by ${r.messageId}`);
    return printChecks([
      { what: "deliveries (with redeliveries and the replay)", expected: 7, actual: queue.deliveries },
      { what: "answered from the stored response", expected: 2, actual: tally.replayed },
      { what: "runs that executed the phase", expected: 5, actual: tally.executed },
      { what: "ledger rows added", expected: 4, actual: tally.rowsAdded },
      { what: "duplicates refused by the constraint", expected: 1, actual: tally.duplicatesRefused },
      { what: "events missing from the ledger", expected: 0, actual: missing.length },
      { what: "ledger rows (must equal distinct events)", expected: distinct.size, actual: rows.length },
    ]);
  } finally {
    await db.destroy();
  }
}

try {
  process.exitCode = (await main()) ? 0 : 1;
} catch (error) {
  console.error(error instanceof StoryError ? `\nEXAMPLE FAILED: ${error.message}` : error);
  process.exitCode = 1;
}
