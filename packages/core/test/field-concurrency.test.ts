/**
 * Field fault of the kind "concurrency": simultaneous first requests for
 * one key. The claim must be one atomic statement: exactly one request
 * executes, every other one gets 409 or the replay, promptly, and nothing
 * escapes as an unexpected error or a hang. "Promptly" is checked without a
 * clock: the winner is held at its first boundary until every other caller
 * has its answer, so a loser that waited on the winner would never answer.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine, RunResult } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError } from "../src/index.ts";
import { setFaultHook } from "../src/internal.ts";
import { countOrders, deferred, raceThroughBarrier } from "./field-support/harness.ts";
import { makeCheckout } from "./support/checkout.ts";
import { useTestDatabase } from "./support/db.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
// Long enough that no loser can find the winner's lease expired, however slow the machine.
const LEASE_MS = 20_000;
/** Only a loser stuck behind the winner reaches this; it fails the round instead of hanging the file. */
const LOSERS_DEADLINE_MS = 60_000;
const CALLERS = 25;
const ROUNDS = 10;
/** Five "app servers", each with its own pool, share the 25 callers. */
const SERVERS = 5;
let engines: Engine[] = [];

const payments = new FakePayments();
const { workflow: checkout, counters } = makeCheckout(payments, { createOrderDelayMs: 200 });
const input = { cartId: "c1", amountCents: 500 };

beforeAll(() => {
  engines = Array.from({ length: SERVERS }, () => createEngine({ db: t.connect(6), leaseMs: LEASE_MS }));
});

describe("concurrency: simultaneous first requests for one key (BR-06)", () => {
  it(`${CALLERS} same-key first requests through a barrier: one execution, the rest 409 or replay while the winner is held`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const key = `race-${round}`;
      // Hold the winner before its first phase until the other callers have all been answered.
      const losersIn = deferred();
      let settledWhileHeld = -1;
      let settled = 0;
      for (const engine of engines) {
        setFaultHook(engine, async (point, run) => {
          if (point !== "before:phase:create_order" || run.key !== key || run.attempt !== 1) return;
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([
            losersIn.promise,
            new Promise((resolve) => {
              timer = setTimeout(resolve, LOSERS_DEADLINE_MS);
            }),
          ]);
          clearTimeout(timer);
          settledWhileHeld = settled;
        });
      }
      const before = {
        ...counters,
        calls: payments.calls.length,
        charges: payments.charges,
        orders: await countOrders(t.db),
      };

      const results = await raceThroughBarrier(CALLERS, (i) =>
        (engines[i % SERVERS] as Engine).runOnce(checkout, { tenantId: "t1", key, input }).finally(() => {
          if (++settled === CALLERS - 1) losersIn.resolve();
        }),
      );
      expect(settledWhileHeld, `round ${round}: callers answered while the winner was held`).toBe(CALLERS - 1);

      const executed = results.filter((r) => r.ok && !r.value.replayed);
      expect(executed, `round ${round}: executions`).toHaveLength(1);
      const winner = (executed[0] as { value: RunResult<{ orderId: string; chargeId: string }> }).value;
      expect(winner.status).toBe(201);
      for (const r of results) {
        if (r.ok) {
          expect(r.value.status).toBe(201);
          expect(JSON.stringify(r.value.body)).toBe(JSON.stringify(winner.body));
        } else {
          expect(r.error, `round ${round}: unexpected ${String(r.error)}`).toBeInstanceOf(
            IdempotencyKeyInProgressError,
          );
          const retryAfter = (r.error as IdempotencyKeyInProgressError).retryAfterMs;
          expect(retryAfter).toBeGreaterThan(0);
          expect(retryAfter).toBeLessThanOrEqual(LEASE_MS);
        }
      }

      // Effects, not just answers: one order, one provider call, one charge.
      expect(counters.create_order - before.create_order).toBe(1);
      expect(counters.charge - before.charge).toBe(1);
      expect(counters.record_charge - before.record_charge).toBe(1);
      expect(payments.calls.length - before.calls).toBe(1);
      expect(payments.charges - before.charges).toBe(1);
      expect((await countOrders(t.db)) - before.orders).toBe(1);

      // One row, completed by its first attempt; the history shows one execution.
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.runs WHERE key = ${key}`.execute(
        t.db,
      );
      expect(rows[0]?.n).toBe(1);
      const rec = await (engines[0] as Engine).inspect("t1", key);
      expect(rec).toMatchObject({ status: "completed", attempt: 1, response: { status: 201, body: winner.body } });
      expect(rec?.history?.map((h) => `${h.name}:${h.outcome}`)).toEqual([
        "create_order:succeeded",
        "charge:succeeded",
        "record_charge:succeeded",
      ]);

      // One more request after everything settled replays the same body.
      const late = await (engines[round % SERVERS] as Engine).runOnce(checkout, { tenantId: "t1", key, input });
      expect(late).toEqual({ ...winner, replayed: true });
    }
  });
});
