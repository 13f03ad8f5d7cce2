/**
 * Fault kind "connection lost while waiting": during a failover the callers
 * that wait for a run another attempt holds (`engine.wait`, `runOnce` with
 * `waitInFlightMs`) see their polls fail for a few seconds. A wait is a
 * read, and a waiting `runOnce` only looks again: neither may give up on a
 * lost connection while it has time left. Here the waiters' database is
 * cut off (every connect fails as node-postgres reports it) while the run
 * they wait for finishes on another connection; both get its answer.
 */
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const T = "waiters";
let down = false;
let real: pg.Pool;
let waiters: Engine;

beforeAll(() => {
  real = new pg.Pool({ connectionString: t.url, max: 4 });
  real.on("error", () => undefined);
  // The waiters' pool: while `down`, no connection can be had, as while no primary is up.
  const pool = {
    connect: async () => {
      if (down) throw new Error("Connection terminated unexpectedly");
      return real.connect();
    },
    end: () => real.end(),
  };
  // unavailableRetryMs 0: the engine's own statements do not ride the outage out; the waiting must.
  waiters = createEngine({ db: new Kysely({ dialect: new PostgresDialect({ pool }) }), unavailableRetryMs: 0 });
});
afterAll(async () => {
  await real.end();
});

let open: () => void = () => undefined;
const gate = new Promise<void>((resolve) => {
  open = resolve;
});
const gated = workflow("waited_for", { leaseMs: 30_000 })
  .step("slow", async () => {
    await gate;
    return { slow: "done" };
  })
  .respond(({ state }) => ({ status: 201, body: { slow: state.slow } }));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("engine.wait and a waitInFlightMs holder keep waiting through a lost connection and get the answer", async () => {
  const owner = createEngine({ db: t.db });
  const running = owner.runOnce(gated, { tenantId: T, key: "k", input: {} });
  while ((await owner.inspect(T, "k"))?.status !== "in_flight") await sleep(20);

  const waited = waiters.wait(T, "k", { timeoutMs: 60_000 });
  const held = waiters.runOnce(gated, { tenantId: T, key: "k", input: {}, waitInFlightMs: 60_000 });
  await sleep(100);
  down = true;
  await sleep(1_500);
  open();
  expect(await running).toMatchObject({ status: 201, body: { slow: "done" }, replayed: false });
  await sleep(300);
  down = false;

  expect(await waited).toMatchObject({ status: 201, body: { slow: "done" } });
  expect(await held).toMatchObject({ status: 201, body: { slow: "done" }, replayed: true });
});
