/**
 * Zombie attempts: an attempt that paused past its lease while another took
 * over must find out at its next write, fail with LeaseLostError, and leave
 * nothing behind (its transaction's business writes roll back; the record
 * the new owner wrote stays exactly as it was).
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, LeaseLostError, workflow } from "../src/index.ts";
import { setHeartbeatSilenced } from "../src/internal.ts";
import { type TestDb, useTestDatabase } from "./support/db.ts";
import { countOrders, historyOf, recordSnapshot } from "./support/effects.ts";
import { pauseAt, waitForLeaseExpiry, waitPastCurrentLease } from "./support/faults.ts";
import { FakePayments } from "./support/payments.ts";

const t = useTestDatabase();
const T = "acme";
// Short lease, no renewal: a paused attempt loses its key after 300 ms.
const ZOMBIE_OPTS = { leaseMs: 300 };

/** A second pool: the "other process" that takes over. Closed by useTestDatabase. */
let second: TestDb;
beforeAll(() => {
  second = t.connect(5);
});

interface Gate {
  reached: Promise<void>;
  reach(): void;
  open(): void;
  wait: Promise<void>;
}
function gate(): Gate {
  const g = {} as Gate;
  g.reached = new Promise((r) => {
    g.reach = r;
  });
  g.wait = new Promise((r) => {
    g.open = r;
  });
  return g;
}

/** Checkout whose record_charge leaves a marker row per attempt; attempt 1 can be held at chosen places. */
function fencedCheckout(
  payments: FakePayments,
  hold: { inPhase?: Gate; inRespond?: Gate; inStepThenFail?: Gate; inFirstPhase?: Gate } = {},
) {
  return workflow("checkout")
    .phase("create_order", async ({ tx, tenantId, key, attempt, reject }) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`o_${key}_${attempt}`}, ${tenantId}, ${`c-${key}`}, 10)`.execute(
        tx,
      );
      if (attempt === 1 && hold.inFirstPhase) {
        hold.inFirstPhase.reach();
        await hold.inFirstPhase.wait;
        reject(409, { error: "out_of_stock" });
      }
      return { orderId: `o_${key}_${attempt}` };
    })
    .step("charge", async ({ state, idempotencyKey, attempt, fail }) => {
      const { id } = payments.charge({ orderId: state.orderId, amountCents: 10 }, idempotencyKey);
      if (attempt === 1 && hold.inStepThenFail) {
        hold.inStepThenFail.reach();
        await hold.inStepThenFail.wait;
        fail(402, { error: "card_declined" });
      }
      return { chargeId: id };
    })
    .phase("record_charge", async ({ tx, tenantId, key, state, attempt }) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${`m_${key}_${attempt}`}, ${tenantId}, ${`marker-${key}`}, 0)`.execute(
        tx,
      );
      if (attempt === 1 && hold.inPhase) {
        hold.inPhase.reach();
        await hold.inPhase.wait;
      }
      // A zombie held in respond keeps this phase's transaction open; a row lock on the
      // order would make the taker wait for the zombie forever, so that case skips it.
      if (!hold.inRespond) {
        await sql`UPDATE orders SET status = 'paid', charge_id = ${`${state.chargeId}@${attempt}`} WHERE id = ${state.orderId}`.execute(
          tx,
        );
      }
      return { recordedBy: attempt };
    })
    .respond(async ({ state, attempt }) => {
      if (attempt === 1 && hold.inRespond) {
        hold.inRespond.reach();
        await hold.inRespond.wait;
      }
      return { status: 201, body: { ...state, respondedBy: attempt } };
    });
}

async function markers(key: string): Promise<string[]> {
  const { rows } = await sql<{
    id: string;
  }>`SELECT id FROM orders WHERE cart_id = ${`marker-${key}`} ORDER BY id`.execute(t.db);
  return rows.map((r) => r.id);
}

interface Hold {
  reached: Promise<void>;
  release(): void;
}

/**
 * Start attempt A and hold it (`holdA`), let its lease lapse, have B (another
 * process) take over. B then either finishes (`takerPausesAt` undefined) or
 * stays in flight, held at `takerPausesAt`, so A resumes while the key is
 * still in flight under B's owner token: only the token can fence A then.
 * Returns A's error, the record just before and just after A resumed, and
 * B's final result.
 */
async function zombieScenario(
  key: string,
  wf: ReturnType<typeof fencedCheckout>,
  holdA: (a: Engine) => Hold,
  takerPausesAt?: string,
) {
  const a = createEngine({ db: t.db, ...ZOMBIE_OPTS });
  const b = createEngine({ db: second, ...ZOMBIE_OPTS });
  // No renewals: A's lease lapses while it is held, as a stalled process's would.
  setHeartbeatSilenced(a, true);
  setHeartbeatSilenced(b, true);
  const held = holdA(a);
  const attemptA = a.runOnce(wf, { tenantId: T, key, input: {} }).then(
    () => undefined,
    (e: unknown) => e,
  );
  await held.reached;
  await waitForLeaseExpiry(b, T, key);
  const pauseB = takerPausesAt ? pauseAt(b, takerPausesAt, { attempt: 2 }) : undefined;
  const attemptB = b.runOnce(wf, { tenantId: T, key, input: {} });
  if (pauseB) await pauseB.reached;
  else await attemptB;
  const beforeA = await recordSnapshot(b, T, key);
  held.release();
  const errorA = await attemptA;
  const afterA = await recordSnapshot(b, T, key);
  pauseB?.resume();
  const byB = await attemptB;
  return { b, byB, beforeA, afterA, errorA };
}

const gateHold = (g: Gate) => (): Hold => ({ reached: g.reached, release: g.open });
const pointHold =
  (point: string) =>
  (a: Engine): Hold => {
    const p = pauseAt(a, point);
    return { reached: p.reached, release: p.resume };
  };

function expectLeaseLost(error: unknown) {
  expect(error).toBeInstanceOf(LeaseLostError);
  expect(error).toMatchObject({ code: "lease_lost", httpStatus: 409 });
}

describe("zombie attempt after a takeover", () => {
  it("paused inside a phase, taker still in flight: its commit fails with LeaseLostError and the phase's writes roll back", async () => {
    const payments = new FakePayments();
    const hold = gate();
    const wf = fencedCheckout(payments, { inPhase: hold });
    const r = await zombieScenario("z-phase", wf, gateHold(hold), "before:phase:record_charge");
    expectLeaseLost(r.errorA);
    expect(r.beforeA).toMatchObject({ status: "in_flight", attempt: 2, recoveryPoint: "charge" });
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB).toMatchObject({ status: 201, body: { recordedBy: 2, respondedBy: 2 } });
    expect(await markers("z-phase")).toEqual(["m_z-phase_2"]);
    const { rows } = await sql<{ charge_id: string }>`SELECT charge_id FROM orders WHERE id = 'o_z-phase_1'`.execute(
      t.db,
    );
    expect(rows).toEqual([{ charge_id: "ch_1@2" }]);
    expect(await historyOf(r.b, T, "z-phase")).toEqual([
      "create_order:1:succeeded",
      "charge:1:succeeded",
      "record_charge:2:succeeded",
    ]);
    expect([payments.calls.length, payments.charges]).toEqual([1, 1]);
  });

  it("paused inside a phase, taker already completed: LeaseLostError, the completed record is untouched", async () => {
    const payments = new FakePayments();
    const hold = gate();
    const wf = fencedCheckout(payments, { inPhase: hold });
    const r = await zombieScenario("z-phase-done", wf, gateHold(hold));
    expectLeaseLost(r.errorA);
    expect(r.beforeA).toMatchObject({ status: "completed", attempt: 2 });
    expect(r.afterA).toEqual(r.beforeA);
    expect(await markers("z-phase-done")).toEqual(["m_z-phase-done_2"]);
  });

  it("paused before a phase: the phase it then runs cannot commit, its marker row never exists", async () => {
    const wf = fencedCheckout(new FakePayments());
    const r = await zombieScenario(
      "z-before",
      wf,
      pointHold("before:phase:record_charge"),
      "before:phase:record_charge",
    );
    expectLeaseLost(r.errorA);
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB.status).toBe(201);
    expect(await markers("z-before")).toEqual(["m_z-before_2"]);
  });

  it("paused between a step's call and its record: the record is refused, the taker's result stands", async () => {
    const payments = new FakePayments();
    const wf = fencedCheckout(payments);
    const r = await zombieScenario("z-step", wf, pointHold("called:step:charge"), "after:step:charge");
    expectLeaseLost(r.errorA);
    expect(r.beforeA).toMatchObject({ status: "in_flight", attempt: 2, recoveryPoint: "charge" });
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB.status).toBe(201);
    // A never went on to record_charge: only B's marker exists.
    expect(await markers("z-step")).toEqual(["m_z-step_2"]);
    expect(await historyOf(r.b, T, "z-step")).toEqual([
      "create_order:1:succeeded",
      "charge:1:interrupted",
      "charge:2:succeeded",
      "record_charge:2:succeeded",
    ]);
    expect(new Set(payments.calls.map((c) => c.key)).size).toBe(1);
    expect([payments.calls.length, payments.charges]).toEqual([2, 1]);
  });

  it("paused after its step start was recorded: the zombie's late call uses the same key, its record is refused", async () => {
    const payments = new FakePayments();
    const wf = fencedCheckout(payments);
    const r = await zombieScenario("z-start", wf, pointHold("before:step:charge"), "after:step:charge");
    expectLeaseLost(r.errorA);
    expect(r.afterA).toEqual(r.beforeA);
    expect(payments.calls.length).toBeLessThanOrEqual(2);
    expect(new Set(payments.calls.map((c) => c.key)).size).toBe(1);
    expect(payments.charges).toBe(1);
    expect(await markers("z-start")).toEqual(["m_z-start_2"]);
  });

  it("paused in respond, at completion: the completing commit is refused and the taker's response is kept", async () => {
    const hold = gate();
    const wf = fencedCheckout(new FakePayments(), { inRespond: hold });
    const r = await zombieScenario("z-done", wf, gateHold(hold), "before:phase:record_charge");
    expectLeaseLost(r.errorA);
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB).toMatchObject({ status: 201, body: { respondedBy: 2, recordedBy: 2 } });
    expect((await recordSnapshot(r.b, T, "z-done"))?.response).toMatchObject({ body: { respondedBy: 2 } });
    expect(await markers("z-done")).toEqual(["m_z-done_2"]);
  });

  it("ctx.fail from a zombie step does not complete the run under the taker", async () => {
    const hold = gate();
    const wf = fencedCheckout(new FakePayments(), { inStepThenFail: hold });
    const r = await zombieScenario("z-fail", wf, gateHold(hold), "after:step:charge");
    expectLeaseLost(r.errorA);
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB).toMatchObject({ status: 201, outcome: "succeeded" });
  });

  it("ctx.reject from a zombie does not delete the taker's claim, and its writes roll back", async () => {
    const hold = gate();
    const wf = fencedCheckout(new FakePayments(), { inFirstPhase: hold });
    const r = await zombieScenario("z-reject", wf, gateHold(hold), "before:phase:create_order");
    expectLeaseLost(r.errorA);
    expect(r.beforeA).toMatchObject({ status: "in_flight", attempt: 2, recoveryPoint: null });
    expect(r.afterA).toEqual(r.beforeA);
    expect(r.byB.status).toBe(201);
    expect(await countOrders(t.db, { cartId: "c-z-reject" })).toBe(1);
  });
});

describe("live attempts and the heartbeat", () => {
  it("a slow attempt that renews its lease keeps its key: retries get 409, no takeover", async () => {
    // The step outlasts the lease three times over: only the heartbeat keeps the key.
    const a = createEngine({ db: t.db, leaseMs: 1500, heartbeatMs: 100 });
    const b = createEngine({ db: second, leaseMs: 1500 });
    let calls = 0;
    const started = gate();
    const slow = workflow("slow")
      .step("export", async () => {
        calls++;
        started.reach();
        await started.wait;
        return { done: true };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const running = a.runOnce(slow, { tenantId: T, key: "hb-live", input: {} }).catch((e: unknown) => e);
    await started.reached;
    for (let i = 0; i < 3; i++) {
      await waitPastCurrentLease(t.db, T, "hb-live");
      await expect(b.runOnce(slow, { tenantId: T, key: "hb-live", input: {} })).rejects.toBeInstanceOf(
        IdempotencyKeyInProgressError,
      );
    }
    started.open();
    expect(await running).toMatchObject({ status: 200, replayed: false });
    expect(calls).toBe(1);
    expect((await a.inspect(T, "hb-live"))?.attempt).toBe(1);
  });

  it("a workflow's own shorter leaseMs is renewed too: the default heartbeat follows the run's lease, not the engine's", async () => {
    const a = createEngine({ db: t.db }); // engine lease 30 s: a heartbeat derived from it would tick every 10 s
    const b = createEngine({ db: second });
    let calls = 0;
    const started = gate();
    const wf = workflow("short_lease", { leaseMs: 3000 })
      .step("export", async () => {
        calls++;
        started.reach();
        await started.wait;
        return { done: true };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const running = a.runOnce(wf, { tenantId: T, key: "wf-lease", input: {} }).catch((e: unknown) => e);
    await started.reached;
    for (let i = 0; i < 2; i++) {
      await waitPastCurrentLease(t.db, T, "wf-lease");
      await expect(b.runOnce(wf, { tenantId: T, key: "wf-lease", input: {} })).rejects.toBeInstanceOf(
        IdempotencyKeyInProgressError,
      );
    }
    started.open();
    expect(await running).toMatchObject({ status: 200, replayed: false });
    expect(calls).toBe(1);
    expect((await a.inspect(T, "wf-lease"))?.attempt).toBe(1);
  });

  it("a live attempt that is taken over learns it from its fenced heartbeat: signal aborts, LeaseLostError", async () => {
    const a = createEngine({ db: t.db, leaseMs: 300, heartbeatMs: 75 });
    const b = createEngine({ db: second, leaseMs: 300 });
    setHeartbeatSilenced(b, true);
    const seen: { aborted: boolean; reason: unknown }[] = [];
    const inStep = gate();
    const wf = workflow("watched")
      .step("export", async ({ attempt, signal }) => {
        if (attempt > 1) return { by: attempt };
        inStep.reach();
        await new Promise<void>((resolve) => {
          // Only a broken heartbeat gets here; the assertions below then fail.
          const timer = setTimeout(resolve, 60_000);
          const onAbort = () => {
            clearTimeout(timer);
            resolve();
          };
          signal.addEventListener("abort", onAbort, { once: true });
        });
        seen.push({ aborted: signal.aborted, reason: signal.reason });
        return { by: attempt };
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const attemptA = a.runOnce(wf, { tenantId: T, key: "hb-lost", input: {} }).catch((e: unknown) => e);
    await inStep.reached;
    // B stays in flight (held after its call) so only the owner token can tell A it lost the key.
    const pauseB = pauseAt(b, "called:step:export", { attempt: 2 });
    // The live heartbeat may renew between release and the retry; try until B takes over.
    let attemptB: Promise<unknown> | undefined;
    const deadline = Date.now() + 60_000;
    while (!attemptB && Date.now() < deadline) {
      await b.release(T, "hb-lost");
      const p = b.runOnce(wf, { tenantId: T, key: "hb-lost", input: {} }).catch((e: unknown) => e);
      if ((await Promise.race([pauseB.reached.then(() => "taken"), p.then(() => "refused")])) === "taken") attemptB = p;
    }
    expect(attemptB).toBeDefined();
    expectLeaseLost(await attemptA);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.aborted).toBe(true);
    expect(seen[0]?.reason).toBeInstanceOf(LeaseLostError);
    pauseB.resume();
    expect(await attemptB).toMatchObject({ status: 200, body: { by: 2 } });
    expect((await b.inspect(T, "hb-lost"))?.response?.body).toEqual({ by: 2 });
  });
});
