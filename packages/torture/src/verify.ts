/**
 * The check against ground truth, intent by intent, from the tables the
 * killed processes could not take with them: idempo's records, the effects
 * ledger and business rows, the provider's operations, the outbox and the
 * mailbox. Each finding counts as a duplicate (something happened more
 * than once), a lost intent (something that must exist does not), or
 * another violation (it exists, but disagrees with what a client was told).
 */
import { deriveStepKey } from "@idempo/core";
import type pg from "pg";
import type { Intent, IntentBook } from "./intents.ts";
import { declines } from "./provider.ts";
import { expectationFor } from "./workflows/catalogue.ts";

export interface Verdict {
  readonly duplicateEffects: number;
  readonly lostIntents: number;
  readonly otherViolations: number;
  readonly takeovers: number;
  readonly providerCalls: number;
  readonly providerOperations: number;
  readonly messages: number;
  readonly deliveries: number;
  readonly problems: readonly string[];
}

interface RunRow {
  tenant_id: string;
  key: string;
  workflow: string;
  status: string;
  outcome: string | null;
  response_status: number | null;
  body: string | null;
  attempt: number;
}
interface OperationRow {
  tenant_id: string;
  intent_key: string;
  step: string;
  idempotency_key: string;
  result_id: string;
}
interface MessageRow {
  tenant_id: string;
  key: string;
  message_id: string;
  topic: string;
  delivery_key: string;
  status: string;
}
interface DeliveryRow {
  message_id: string;
  n: number;
  keys: number;
  delivery_key: string;
}

const id = (...parts: string[]) => parts.join("\u0000");

function groupBy<T>(rows: readonly T[], keyOf: (row: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const row of rows) {
    const k = keyOf(row);
    const list = map.get(k);
    if (list) list.push(row);
    else map.set(k, [row]);
  }
  return map;
}

async function rows<T extends pg.QueryResultRow>(pool: pg.Pool, text: string): Promise<T[]> {
  return (await pool.query<T>(text)).rows;
}

export async function verify(pool: pg.Pool, book: IntentBook, replays: ReadonlyMap<number, string>): Promise<Verdict> {
  const runs = await rows<RunRow>(
    pool,
    `SELECT tenant_id, key, workflow, status, outcome, response_status, response_body::text AS body, attempt
     FROM idempo.runs`,
  );
  const effects = await rows<{ tenant_id: string; key: string; phase: string; n: number }>(
    pool,
    "SELECT tenant_id, key, phase, count(*)::int AS n FROM shop.effects GROUP BY 1, 2, 3",
  );
  const operations = await rows<OperationRow>(
    pool,
    "SELECT tenant_id, intent_key, step, idempotency_key, result_id FROM provider.operations",
  );
  const [calls] = await rows<{ n: number }>(pool, "SELECT count(*)::int AS n FROM provider.calls");
  const orders = await rows<{
    tenant_id: string;
    cart_id: string;
    id: string;
    status: string;
    charge_id: string | null;
  }>(pool, "SELECT tenant_id, cart_id, id, status, charge_id FROM shop.orders");
  const reservations = await rows<{ tenant_id: string; order_ref: string; id: string; status: string }>(
    pool,
    "SELECT tenant_id, order_ref, id, status FROM shop.reservations",
  );
  const invoices = await rows<{
    tenant_id: string;
    order_ref: string;
    id: string;
    charge_id: string;
    shipment_id: string;
    closed: boolean;
  }>(pool, "SELECT tenant_id, order_ref, id, charge_id, shipment_id, closed FROM shop.invoices");
  const messages = await rows<MessageRow>(
    pool,
    "SELECT tenant_id, key, message_id, topic, delivery_key, status FROM idempo.outbox",
  );
  const deliveries = await rows<DeliveryRow>(
    pool,
    `SELECT message_id, count(*)::int AS n, count(DISTINCT delivery_key)::int AS keys, min(delivery_key) AS delivery_key
     FROM mailbox.deliveries GROUP BY message_id`,
  );

  const runBy = new Map(runs.map((r) => [id(r.tenant_id, r.key), r]));
  const effectBy = new Map(effects.map((e) => [id(e.tenant_id, e.key, e.phase), e.n]));
  const opsBy = groupBy(operations, (o) => id(o.tenant_id, o.intent_key, o.step));
  const ordersBy = groupBy(orders, (o) => id(o.tenant_id, o.cart_id));
  const reservationsBy = groupBy(reservations, (r) => id(r.tenant_id, r.order_ref));
  const invoicesBy = groupBy(invoices, (i) => id(i.tenant_id, i.order_ref));
  const messagesBy = groupBy(messages, (m) => id(m.tenant_id, m.key, m.topic));
  const deliveriesBy = new Map(deliveries.map((d) => [d.message_id, d]));

  let duplicateEffects = 0;
  let lostIntents = 0;
  let otherViolations = 0;
  const problems: string[] = [];
  const violation = (what: string) => {
    otherViolations++;
    problems.push(what);
  };

  for (const intent of book.intents) {
    const where = `${intent.tenantId}/${intent.key} (${intent.workflow})`;
    let lost = false;
    const missing = (what: string) => {
      lost = true;
      problems.push(`${where}: ${what}`);
    };
    const extra = (what: string, n: number) => {
      duplicateEffects += n - 1;
      problems.push(`${where}: ${what} ${n} times`);
    };
    const wrong = (what: string) => violation(`${where}: ${what}`);
    const expected = expectationFor(intent.workflow, intent.input);

    const run = runBy.get(id(intent.tenantId, intent.key));
    if (!run) missing("no record");
    else if (run.status !== "completed") missing(`left ${run.status} at attempt ${run.attempt}`);
    else if (run.outcome !== expected.outcome || run.response_status !== expected.status) {
      missing(`completed as ${run.outcome} ${run.response_status}`);
    }

    for (const phase of expected.phases) {
      const n = effectBy.get(id(intent.tenantId, intent.key, phase)) ?? 0;
      if (n === 0) missing(`phase ${phase} never committed`);
      if (n > 1) extra(`phase ${phase} committed`, n);
    }
    for (const phase of expected.skipped) {
      const n = effectBy.get(id(intent.tenantId, intent.key, phase)) ?? 0;
      if (n > 0) extra(`phase ${phase} committed after the run failed`, n + 1);
    }

    const result = new Map<string, string>();
    for (const step of expected.steps) {
      const ops = opsBy.get(id(intent.tenantId, intent.key, step)) ?? [];
      if (ops.length === 0) missing(`no provider operation for step ${step}`);
      if (ops.length > 1) extra(`provider operation for step ${step} made`, ops.length);
      const op = ops[0];
      if (!op) continue;
      result.set(step, op.result_id);
      const derived = deriveStepKey(intent.tenantId, intent.key, intent.workflow, step);
      if (ops.some((o) => o.idempotency_key !== derived)) wrong(`step ${step} reached the provider under another key`);
    }

    for (const topic of expected.topics) {
      const list = messagesBy.get(id(intent.tenantId, intent.key, topic)) ?? [];
      if (list.length === 0) missing(`no ${topic} message`);
      if (list.length > 1) extra(`${topic} message enqueued`, list.length);
      for (const m of list) {
        const d = deliveriesBy.get(m.message_id);
        if (m.status !== "delivered" || !d)
          missing(`${topic} message ${m.message_id} ${d ? m.status : "never delivered"}`);
        else if (d.keys !== 1 || d.delivery_key !== m.delivery_key) {
          wrong(`${topic} message delivered under ${d.keys} delivery keys`);
        }
      }
    }

    const body = run?.body ? (JSON.parse(run.body) as Record<string, unknown>) : {};
    const business = checkBusiness(intent, body, result, { ordersBy, reservationsBy, invoicesBy });
    for (const b of business.missing) missing(b);
    for (const b of business.wrong) wrong(b);
    if (business.extra > 0) extra("reservation made", business.extra + 1);

    if (run?.body != null) {
      const stored = `${run.response_status} ${run.body}`;
      const replay = replays.get(intent.id);
      if (replay !== undefined && replay !== stored) wrong(`final replay ${replay} differs from the stored ${stored}`);
      if (intent.firstSeen !== undefined && intent.firstSeen !== stored) {
        wrong(`first response ${intent.firstSeen} differs from the stored ${stored}`);
      }
    }
    if (lost) lostIntents++;
  }

  const enqueued = new Set(messages.map((m) => m.message_id));
  for (const d of deliveries) if (!enqueued.has(d.message_id)) violation(`delivery of unknown message ${d.message_id}`);
  const minted = new Set(book.intents.map((i) => id(i.tenantId, i.key)));
  for (const r of runs) if (!minted.has(id(r.tenant_id, r.key))) violation(`record for unknown key ${r.key}`);

  return {
    duplicateEffects,
    lostIntents,
    otherViolations,
    takeovers: runs.reduce((sum, r) => sum + r.attempt - 1, 0),
    providerCalls: calls?.n ?? 0,
    providerOperations: operations.length,
    messages: messages.length,
    deliveries: deliveries.reduce((sum, d) => sum + d.n, 0),
    problems,
  };
}

interface Business {
  ordersBy: Map<string, { id: string; status: string; charge_id: string | null }[]>;
  reservationsBy: Map<string, { id: string; status: string }[]>;
  invoicesBy: Map<string, { id: string; charge_id: string; shipment_id: string; closed: boolean }[]>;
}

/** The business rows of one intent, and whether the stored response names them. */
function checkBusiness(
  intent: Intent,
  body: Record<string, unknown>,
  result: ReadonlyMap<string, string>,
  t: Business,
): { missing: string[]; extra: number; wrong: string[] } {
  const missing: string[] = [];
  let extra = 0;
  const wrong: string[] = [];
  const same = (field: string, actual: unknown, expected: string | undefined) => {
    if (expected !== undefined && actual !== expected)
      wrong.push(`response ${field} ${String(actual)} is not ${expected}`);
  };
  if (intent.workflow === "checkout") {
    const order = (t.ordersBy.get(id(intent.tenantId, String(intent.input.cartId))) ?? [])[0];
    const charge = result.get("charge");
    same("orderId", body.orderId, order?.id);
    if (!order) missing.push("no order");
    else if (declines(Number(intent.input.amountCents))) {
      // Declined: the order stays unpaid and the stored 402 names the provider's decline.
      if (order.status !== "created" || order.charge_id !== null) wrong.push(`declined order ${order.id} was paid`);
      same("declineId", body.declineId, charge);
    } else {
      if (order.status !== "paid") missing.push(`order ${order.id} is ${order.status}`);
      else if (order.charge_id !== charge) wrong.push(`order paid by ${order.charge_id}, not the provider's charge`);
      same("chargeId", body.chargeId, charge);
    }
    return { missing, extra, wrong };
  }
  const ref = id(intent.tenantId, String(intent.input.orderRef));
  const reservations = t.reservationsBy.get(ref) ?? [];
  const reservation = reservations[0];
  const invoice = (t.invoicesBy.get(ref) ?? [])[0];
  if (!reservation) missing.push("no reservation");
  else if (reservation.status !== "settled") missing.push(`reservation ${reservation.id} is ${reservation.status}`);
  if (!invoice) missing.push("no invoice");
  else if (!invoice.closed) missing.push(`invoice ${invoice.id} is open`);
  else if (invoice.charge_id !== result.get("charge") || invoice.shipment_id !== result.get("ship")) {
    wrong.push(`invoice ${invoice.id} names another charge or shipment than the provider made`);
  }
  same("reservationId", body.reservationId, reservation?.id);
  same("invoiceId", body.invoiceId, invoice?.id);
  same("chargeId", body.chargeId, result.get("charge"));
  same("shipmentId", body.shipmentId, result.get("ship"));
  same("notificationId", body.notificationId, result.get("notify"));
  // Reservations have no unique constraint: a second one is a duplicate effect, not an error.
  extra = Math.max(0, reservations.length - 1);
  return { missing, extra, wrong };
}
