/**
 * Fault of the kind "an attempt that never ends holds its key for good":
 * its heartbeat renewed the lease forever, every retry got 409, and a
 * release was undone by the next renewal. Every attempt now has a finite
 * bound (`attemptTimeoutMs`); past it renewal stops, the key is given up,
 * `signal` aborts and `runOnce` rejects even when the code ignores the signal.
 */
import { sql } from "kysely";
import { beforeAll, describe, expect, it } from "vitest";
import {
  AttemptTimeoutError,
  createEngine,
  IdempotencyKeyInProgressError,
  InvalidOptionError,
  LeaseLostError,
  workflow,
} from "../src/index.ts";
import { deferred, rejectionOf } from "./field-support/harness.ts";
import { useTestDatabase } from "./support/db.ts";
import { waitFor } from "./support/faults.ts";

const t = useTestDatabase({ pool: 6 });
const LONG_LEASE_MS = 60_000;

beforeAll(async () => {
  await sql`CREATE TABLE bound_effects (key text, attempt int)`.execute(t.db);
});

describe("attempt bounds", () => {
  it("a step that never settles and ignores its signal: runOnce rejects at the bound, the key is given up, a retry takes over at once", async () => {
    const engine = createEngine({ db: t.db, heartbeatMs: 20 });
    let hang = true;
    let abortReason: unknown;
    const wf = workflow("never_settles", { leaseMs: LONG_LEASE_MS, attemptTimeoutMs: 400 })
      .phase("start", () => ({ started: true }))
      .step("handler", ({ signal }) => {
        if (!hang) return { answered: true };
        signal.addEventListener("abort", () => {
          abortReason = signal.reason;
        });
        return new Promise<{ answered: boolean }>(() => {});
      })
      .respond(({ state }) => ({ status: 200, body: state }));
    const error = await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "b-1", input: {} }));
    expect(error).toBeInstanceOf(AttemptTimeoutError);
    expect(error.message).toMatch(/bound of 400 ms \(attemptTimeoutMs\) in step 'handler'/);
    expect(abortReason).toBe(error);
    const rec = await engine.inspect("t1", "b-1");
    expect(rec).toMatchObject({ status: "in_flight", ownerToken: null, recoveryPoint: "start" });
    expect(rec?.leaseRemainingMs ?? 1).toBeLessThanOrEqual(0);
    hang = false;
    const retry = await engine.runOnce(wf, { tenantId: "t1", key: "b-1", input: {} });
    expect(retry).toMatchObject({ status: 200, body: { started: true, answered: true } });
    expect((await engine.inspect("t1", "b-1"))?.attempt).toBe(2);
  });

  it("a phase that hangs with its transaction open: runOnce rejects at the bound; when the code finally returns its writes roll back", async () => {
    const engine = createEngine({ db: t.db });
    const gate = deferred();
    const reached = deferred();
    let first = true;
    const wf = workflow("hung_phase", { leaseMs: LONG_LEASE_MS, attemptTimeoutMs: 400 })
      .phase("write", async ({ tx, key, attempt }) => {
        await sql`INSERT INTO bound_effects VALUES (${key}, ${attempt})`.execute(tx);
        if (first) {
          first = false;
          reached.resolve();
          await gate.promise;
        }
        return { wrote: attempt };
      })
      .respond(({ state }) => ({ status: 201, body: state }));
    const owner = rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "b-2", input: {} }));
    await reached.promise;
    expect(await owner).toBeInstanceOf(AttemptTimeoutError);
    const retry = await engine.runOnce(wf, { tenantId: "t1", key: "b-2", input: {} });
    expect(retry).toMatchObject({ status: 201, body: { wrote: 2 } });
    gate.resolve();
    // The zombie's transaction is refused at its commit and rolls back: one row, attempt 2's.
    await waitFor(async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = current_database()`.execute(
        t.db,
      );
      return rows[0]?.n === 0 ? true : undefined;
    });
    const { rows } = await sql<{ attempt: number }>`SELECT attempt FROM bound_effects WHERE key = 'b-2'`.execute(t.db);
    expect(rows).toEqual([{ attempt: 2 }]);
  });

  it("before the bound the attempt keeps its lease (409 to retries); the engine option sets the default bound", async () => {
    const engine = createEngine({ db: t.db, heartbeatMs: 20, attemptTimeoutMs: 500 });
    const started = deferred();
    const wf = workflow("engine_bound", { leaseMs: 200 })
      .step("wait", () => {
        started.resolve();
        return new Promise(() => {});
      })
      .respond(() => ({ status: 200, body: null }));
    const owner = rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "b-3", input: {} }));
    await started.promise;
    expect(await rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "b-3", input: {} }))).toBeInstanceOf(
      IdempotencyKeyInProgressError,
    );
    const error = await owner;
    expect(error).toBeInstanceOf(AttemptTimeoutError);
    expect((error as AttemptTimeoutError).attemptTimeoutMs).toBe(500);
  });

  it("a release is not undone by the owner's heartbeat, and the owner's signal aborts with LeaseLostError", async () => {
    const engine = createEngine({ db: t.db, heartbeatMs: 20 });
    const started = deferred();
    const wf = workflow("release_not_undone", { leaseMs: LONG_LEASE_MS })
      .step("wait", () => {
        started.resolve();
        return new Promise(() => {});
      })
      .respond(() => ({ status: 200, body: null }));
    const owner = rejectionOf(engine.runOnce(wf, { tenantId: "t1", key: "b-4", input: {} }));
    await started.promise;
    await engine.release("t1", "b-4");
    expect(await owner).toBeInstanceOf(LeaseLostError);
    expect((await engine.inspect("t1", "b-4"))?.ownerToken).toBeNull();
  });

  it("a bound outside 1 to 2 147 483 647 ms is refused when the workflow is built", () => {
    for (const bad of [0, -1, 1.5, 2 ** 31, Number.NaN]) {
      expect(() => workflow("bad_bound", { attemptTimeoutMs: bad }), String(bad)).toThrow(InvalidOptionError);
    }
  });
});
