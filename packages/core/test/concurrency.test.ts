/**
 * Races on one key over real parallel connections: many engines, each on
 * its own pool (separate "processes"), released through a barrier. Effects
 * are counted: orders rows, provider calls, distinct charges, attempts.
 */
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Engine, RunResult } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, IdempotencyKeyMismatchError, workflow } from "../src/index.ts";
import { CrashSignal } from "../src/internal.ts";
import { makeCheckout } from "./support/checkout.ts";
import { type TestDb, useTestDatabase } from "./support/db.ts";
import { countHistory, countOrders } from "./support/effects.ts";
import { barrier, crashAt, settle } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const T = "acme";
const PROCESSES = 5;
const PER_PROCESS = 10;
const CALLERS = PROCESSES * PER_PROCESS;

/** Open `PROCESSES` pools and make sure every connection is really open before the race. */
async function openProcesses(): Promise<TestDb[]> {
  const pools = Array.from({ length: PROCESSES }, () => t.connect(PER_PROCESS));
  await Promise.all(
    pools.flatMap((db) => Array.from({ length: PER_PROCESS }, () => sql`SELECT pg_sleep(0.05)`.execute(db))),
  );
  return pools;
}

let pools: TestDb[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.destroy()));
  pools = [];
});

/** Start CALLERS runOnce calls, one per connection, all released at the same instant. */
async function race<B>(engines: Engine[], call: (engine: Engine) => Promise<RunResult<B>>) {
  const start = barrier(CALLERS);
  const calls = Array.from({ length: CALLERS }, async (_, i) => {
    await start.wait();
    return call(engines[i % engines.length] as Engine);
  });
  return settle(calls);
}

/** Every error must be a 409; anything else (raced, lease lost, deadlock) is a defect. */
function expectOnly409(errors: unknown[]) {
  const others = errors.filter((e) => !(e instanceof IdempotencyKeyInProgressError));
  expect(others.map((e) => String(e))).toEqual([]);
  for (const e of errors as IdempotencyKeyInProgressError[]) expect(e.retryAfterMs).toBeGreaterThanOrEqual(0);
}

describe("duplicate requests racing on one key", () => {
  it(`${CALLERS} concurrent first requests: exactly one execution, the rest 409 or replay`, async () => {
    if (pools.length === 0) pools = await openProcesses();
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments, { createOrderDelayMs: 200 });
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    const input = { cartId: "c-race", amountCents: 1200 };
    const { values, errors } = await race(engines, (e) => e.runOnce(checkout, { tenantId: T, key: "race-1", input }));
    expectOnly409(errors);
    // The run takes 200 ms, so callers really overlapped it: some must have been refused.
    expect(errors.length).toBeGreaterThan(0);
    const executed = values.filter((v) => !v.replayed);
    expect(executed).toHaveLength(1);
    for (const replay of values.filter((v) => v.replayed)) expect(replay).toEqual({ ...executed[0], replayed: true });
    expect(values.length + errors.length).toBe(CALLERS);
    expect(await countOrders(t.db, { cartId: "c-race" })).toBe(1);
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect([payments.calls.length, payments.charges]).toEqual([1, 1]);
    const rec = await engines[0]?.inspect(T, "race-1");
    expect(rec).toMatchObject({ status: "completed", attempt: 1 });
    expect(await countHistory(t.db, T, "race-1")).toBe(3);
  });

  it(`${CALLERS} concurrent retries of a completed key: all replay, nothing runs`, async () => {
    if (pools.length === 0) pools = await openProcesses();
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments);
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    const input = { cartId: "c-replays", amountCents: 300 };
    const first = await (engines[0] as Engine).runOnce(checkout, { tenantId: T, key: "race-2", input });
    const { values, errors } = await race(engines, (e) => e.runOnce(checkout, { tenantId: T, key: "race-2", input }));
    expect(errors.map(String)).toEqual([]);
    expect(values).toHaveLength(CALLERS);
    for (const v of values) expect(v).toEqual({ ...first, replayed: true });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(await countOrders(t.db, { cartId: "c-replays" })).toBe(1);
  });

  it(`${CALLERS} concurrent retries the moment a crashed run's lease runs out: exactly one takeover`, async () => {
    if (pools.length === 0) pools = await openProcesses();
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments);
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    const input = { cartId: "c-takeovers", amountCents: 300 };
    crashAt(engines[0] as Engine, "after:step:charge");
    await expect(
      (engines[0] as Engine).runOnce(checkout, { tenantId: T, key: "race-3", input }),
    ).rejects.toBeInstanceOf(CrashSignal);
    expect(await (engines[0] as Engine).release(T, "race-3")).toMatchObject({ status: "in_flight" });
    const { values, errors } = await race(engines, (e) => e.runOnce(checkout, { tenantId: T, key: "race-3", input }));
    expectOnly409(errors);
    expect(values.filter((v) => !v.replayed)).toHaveLength(1);
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect([payments.calls.length, payments.charges]).toEqual([1, 1]);
    expect(await countOrders(t.db, { cartId: "c-takeovers" })).toBe(1);
    const rec = await (engines[0] as Engine).inspect(T, "race-3");
    expect(rec).toMatchObject({ status: "completed", attempt: 2 });
    expect(rec?.history?.map((h) => `${h.name}:${h.attempt}`)).toEqual([
      "create_order:1",
      "charge:1",
      "record_charge:2",
    ]);
  });

  it(`${CALLERS} concurrent reuses of a key past retention and tombstone: the key runs again exactly once`, async () => {
    if (pools.length === 0) pools = await openProcesses();
    let runs = 0;
    // No tombstone: the key is absent once retention ends (within a tombstone it is refused with 410).
    const ticket = workflow("ticket", { tombstoneMs: 0 })
      .input(z.object({ cartId: z.string() }))
      .phase("issue", async ({ tx, tenantId, input }) => {
        runs++;
        await new Promise((r) => setTimeout(r, 100));
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_tk_${runs}`}, ${tenantId}, ${input.cartId}, 1)`.execute(
          tx,
        );
        return { run: runs };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    await (engines[0] as Engine).runOnce(ticket, { tenantId: T, key: "race-4", input: { cartId: "c-ticket" } });
    // Retention elapses (on the DB clock) without a sleep, so the race itself has no deadline.
    await sql`UPDATE idempo.runs SET expires_at = clock_timestamp() WHERE tenant_id = ${T} AND key = 'race-4'`.execute(
      t.db,
    );
    expect((await (engines[0] as Engine).inspect(T, "race-4"))?.expired).toBe(true);
    const { values, errors } = await race(engines, (e) =>
      e.runOnce(ticket, { tenantId: T, key: "race-4", input: { cartId: "c-ticket" } }),
    );
    expectOnly409(errors);
    expect(values.filter((v) => !v.replayed)).toHaveLength(1);
    expect(runs).toBe(2);
    expect(await countOrders(t.db, { cartId: "c-ticket" })).toBe(2);
  });

  it(`${CALLERS} concurrent first requests with two payloads: one execution, the other payload only ever gets 422`, async () => {
    if (pools.length === 0) pools = await openProcesses();
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments, { createOrderDelayMs: 200 });
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    const inputOf = (i: number) => ({ cartId: "c-two-payloads", amountCents: i % 2 === 0 ? 100 : 200 });
    const start = barrier(CALLERS);
    const outcomes = await Promise.allSettled(
      Array.from({ length: CALLERS }, async (_, i) => {
        await start.wait();
        return (engines[i % PROCESSES] as Engine).runOnce(checkout, { tenantId: T, key: "race-5", input: inputOf(i) });
      }),
    );
    const winner = outcomes.findIndex((o) => o.status === "fulfilled" && !o.value.replayed);
    expect(winner).toBeGreaterThanOrEqual(0);
    const winnerAmount = inputOf(winner).amountCents;
    outcomes.forEach((o, i) => {
      const same = inputOf(i).amountCents === winnerAmount;
      if (o.status === "fulfilled") expect(same && (i === winner || o.value.replayed)).toBe(true);
      else if (same) expect(o.reason).toBeInstanceOf(IdempotencyKeyInProgressError);
      else expect(o.reason).toBeInstanceOf(IdempotencyKeyMismatchError);
    });
    expect(counters).toEqual({ create_order: 1, charge: 1, record_charge: 1 });
    expect(await countOrders(t.db, { cartId: "c-two-payloads" })).toBe(1);
    expect(payments.charges).toBe(1);
  });

  it("different keys in parallel do not block each other: all execute", async () => {
    if (pools.length === 0) pools = await openProcesses();
    const payments = new FakePayments();
    const { workflow: checkout, counters } = makeCheckout(payments, { createOrderDelayMs: 100 });
    const engines = pools.map((db) => createEngine({ db, leaseMs: 10_000 }));
    const start = barrier(CALLERS);
    const { values, errors } = await settle(
      Array.from({ length: CALLERS }, async (_, i) => {
        await start.wait();
        return (engines[i % PROCESSES] as Engine).runOnce(checkout, {
          tenantId: T,
          key: `many-${i}`,
          input: { cartId: `c-many-${i}`, amountCents: 100 + i },
        });
      }),
    );
    expect(errors.map(String)).toEqual([]);
    expect(values.every((v) => v.status === 201 && !v.replayed)).toBe(true);
    expect(counters).toEqual({ create_order: CALLERS, charge: CALLERS, record_charge: CALLERS });
    expect(payments.charges).toBe(CALLERS);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM orders WHERE cart_id LIKE 'c-many-%' AND status = 'paid'`.execute(t.db);
    expect(rows[0]?.n).toBe(CALLERS);
  });
});
