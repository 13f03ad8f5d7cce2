/**
 * The fan-out cells: what one `.map` over 100 children costs against the
 * same 100 runs enqueued by hand. Each operation starts a fan-out and
 * waits until all of it has completed, run by one worker in this process
 * (16 at once, woken by NOTIFY): with `.map`, one parent run that creates
 * its 100 children in the transaction that records the item's start,
 * suspends, and collects their results; by hand, 100 `enqueue`s in one
 * transaction, then `engine.wait` for each. The children are the same
 * one-phase workflow in both. Both are drained to completion, so the
 * ratio of their fan-outs per second is what the parent's bookkeeping
 * costs (its claim, the children's links, the wake-up and the collection).
 *
 * The worker runs only while these cells run (`BENCH_PARTS=fanout`), so
 * its polling never weighs on the other cells.
 */
import type { Engine, Worker } from "@idempo/core";
import { createEngine, workflow } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type { Cell } from "./cells.js";
import { openPool } from "./setup.js";
import { newKey, TENANT } from "./workload.js";

/** Children per fan-out. */
const FANOUT_CHILDREN = 100;
/** How long one fan-out may take before its operation counts as an error, ms. */
const FANOUT_TIMEOUT_MS = 120_000;

/** The child: one phase, nothing else, so what is measured is the fan-out's own work. */
const fanoutChild = workflow("bench_fanout_child")
  .phase("work", ({ input }) => ({ done: (input as { i: number }).i }))
  .respond(({ state }) => ({ status: 201, body: state.done }));

const inputs = () => Array.from({ length: FANOUT_CHILDREN }, (_, i) => ({ i }));

/** The parent: a `.map` over the 100 children, answering how many completed. */
const fanoutParent = workflow("bench_fanout_map")
  .map("children", fanoutChild, inputs)
  .respond(({ state }) => ({ status: 200, body: state.children.filter((c) => c.status === 201).length }));

/** The cells and what they need running; `close` stops the worker and closes its connections. */
export interface FanoutBench {
  readonly cells: readonly Cell[];
  close(): Promise<void>;
}

/** One `.map` over 100 children, enqueued and waited for. */
async function mapFanout(engine: Engine, db: Kysely<unknown>): Promise<void> {
  const key = newKey();
  await engine.enqueue(db, fanoutParent, { tenantId: TENANT, key, input: {} });
  const res = await engine.wait(TENANT, key, { timeoutMs: FANOUT_TIMEOUT_MS });
  if (res.status !== 200 || res.body !== FANOUT_CHILDREN) {
    throw new Error(`.map fan-out answered ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/** 100 `enqueue`s in one transaction, then a wait for each. */
async function enqueuedFanout(engine: Engine, db: Kysely<unknown>): Promise<void> {
  const key = newKey();
  await db.transaction().execute(async (tx) => {
    for (const input of inputs()) {
      await engine.enqueue(tx, fanoutChild, { tenantId: TENANT, key: `${key}:${input.i}`, input });
    }
  });
  for (const { i } of inputs()) {
    const res = await engine.wait(TENANT, `${key}:${i}`, { timeoutMs: FANOUT_TIMEOUT_MS });
    if (res.status !== 201 || res.body !== i) throw new Error(`child ${i} answered ${res.status}`);
  }
}

/**
 * An engine and a worker of their own on `url` (a pool of 20, and one
 * connection each to LISTEN on), and the two cells at one client each.
 */
export async function prepareFanout(url: string): Promise<FanoutBench> {
  const pool = openPool(url, 20);
  // A client, not a pool: the engine's waiters listen as long as the engine lives, and
  // ending the client is how they stop (a pool's end would wait for them forever).
  const engineListen = new pg.Client({ connectionString: url });
  engineListen.on("error", () => undefined);
  await engineListen.connect();
  const workerListen = new pg.Pool({ connectionString: url, max: 1 });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  const engine = createEngine({ db, listen: engineListen });
  const worker: Worker = engine.startWorker({
    workflows: [fanoutParent, fanoutChild],
    concurrency: 16,
    listen: workerListen,
  });
  return {
    cells: [
      {
        id: `idempo-fanout:map-${FANOUT_CHILDREN}:1`,
        system: "idempo-fanout",
        path: "map-100",
        concurrency: 1,
        op: () => mapFanout(engine, db),
      },
      {
        id: `idempo-fanout:enqueue-${FANOUT_CHILDREN}:1`,
        system: "idempo-fanout",
        path: "enqueue-100",
        concurrency: 1,
        op: () => enqueuedFanout(engine, db),
      },
    ],
    async close() {
      await worker.stop();
      await db.destroy();
      await Promise.all([engineListen.end(), workerListen.end()]);
    },
  };
}
