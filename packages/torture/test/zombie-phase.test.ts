import type { Engine, RunResult } from "@idempo/core";
import { createEngine, LeaseLostError } from "@idempo/core";
import { setFaultHook, setHeartbeatSilenced } from "@idempo/core/internal";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import { installSchema, kyselyOn, openPool } from "../src/database.ts";
import { FakeProvider } from "../src/provider.ts";
import { checkoutWorkflow } from "../src/workflows/checkout.ts";

/**
 * Reduced from the torture run: a zombie (an attempt whose lease ran out
 * while it was stopped) redoes a phase its successor already committed.
 * Its writes must vanish; the SPEC also says it then "fails with
 * LeaseLostError". A heartbeat far longer than the lease stands in for the
 * SIGSTOP of the torture run: the attempt keeps running, its lease does not.
 */
const serverUrl = inject("serverUrl");
const name = uniqueName("idempo_zombie");
let url = "";
let pool: pg.Pool;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  url = await createDatabase(serverUrl, name);
  await installSchema(url);
  pool = openPool(url, "idempo-zombie-test", 8);
});
afterAll(async () => {
  await pool.end();
  await dropDatabase(serverUrl, name);
});

/**
 * Stop attempt 1 of `key` at `point` until its lease has run out, let a
 * second client take the run over and finish it, then let the zombie go on.
 * @returns how the zombie's call ended, and the successor's response.
 */
async function zombieAt(point: string, key: string) {
  const checkout = checkoutWorkflow(new FakeProvider(pool));
  const request = { tenantId: "zombie", key, input: { cartId: `cart-${key}`, amountCents: 500 } };
  const zombie: Engine = createEngine({ db: kyselyOn(pool), leaseMs: 300 });
  // No renewals: the zombie's lease lapses while it is held, as a stalled process's would.
  setHeartbeatSilenced(zombie, true);
  const successor: Engine = createEngine({ db: kyselyOn(pool), leaseMs: 300 });
  let reached!: () => void;
  let release!: () => void;
  const atPoint = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  setFaultHook(zombie, async (p, run) => {
    if (p !== point || run.attempt !== 1) return;
    reached();
    await gate;
  });
  const zombieCall = zombie.runOnce(checkout, request).then(
    (res) => ({ res, error: undefined }),
    (error: unknown) => ({ res: undefined, error }),
  );
  await atPoint;
  await sleep(400);
  const first: RunResult<unknown> = await successor.runOnce(checkout, request);
  release();
  const ended = await zombieCall;
  return { ...ended, first, checkout, successor, request };
}

async function count(query: string, params: unknown[]): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(query, params);
  return rows[0]?.n ?? -1;
}

describe("a zombie redoing its successor's committed phase", () => {
  it("leaves no second effect and the successor's response stands", async () => {
    const { res, first, checkout, successor, request } = await zombieAt("before:phase:record_charge", "z1");
    expect(res).toBeUndefined();
    expect(first).toMatchObject({ status: 201, replayed: false });
    expect(await count("SELECT count(*)::int AS n FROM shop.effects WHERE key = $1", ["z1"])).toBe(2);
    expect(await count("SELECT count(*)::int AS n FROM idempo.outbox WHERE key = $1", ["z1"])).toBe(1);
    expect(await count("SELECT count(*)::int AS n FROM provider.operations WHERE intent_key = $1", ["z1"])).toBe(1);
    const replay = await successor.runOnce(checkout, request);
    expect(replay).toEqual({ ...first, replayed: true });
  });

  // Found by the torture run: a derived delivery key already taken used to
  // surface as WorkflowUsageError, blaming the workflow's code.
  it("fails with LeaseLostError when its outbox message is already enqueued", async () => {
    const { error } = await zombieAt("before:phase:record_charge", "z2");
    expect(error).toBeInstanceOf(LeaseLostError);
  });

  // The business table's unique constraint answers before the fenced write
  // is reached; the engine then checks ownership and reports the lost lease.
  it("fails with LeaseLostError when a unique constraint refuses its insert", async () => {
    const { error } = await zombieAt("before:phase:create_order", "z3");
    expect(error).toBeInstanceOf(LeaseLostError);
  });
});
