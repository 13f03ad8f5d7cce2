/**
 * One fan-out-scenario worker process: an engine on its own pool, with the
 * shared rate limit, running `startWorker` for every workflow pair of the
 * scenario, woken by NOTIFY on a dedicated connection, until the driver
 * SIGKILLs it (nothing is cleaned up: that is the point) or sends "stop"
 * (a clean stop, at the end). Arguments: the database URL, the lease in
 * ms, and how parents start their children (`map` or `enqueue`). Sends
 * "ready" once the worker runs.
 */
import { createEngine } from "@idempo/core";
import pg from "pg";
import { kyselyOn, openPool, WORKER_APP_PREFIX } from "./database.ts";
import { FakeProvider } from "./provider.ts";
import type { FanoutMode } from "./workflows/fan-out.ts";
import { ExecutionMarks, FANOUT_RATE, FANOUT_RATE_LIMIT, fanoutWorkflows } from "./workflows/fan-out.ts";

const url = process.argv[2] as string;
const leaseMs = Number(process.argv[3] ?? "1500");
const mode = (process.argv[4] ?? "map") as FanoutMode;
const pool = openPool(url, `${WORKER_APP_PREFIX}-fanout-${process.pid}`, 10);
const sidePool = openPool(url, `${WORKER_APP_PREFIX}-fanout-side-${process.pid}`, 10);
const listen = new pg.Client({ connectionString: url, application_name: `${WORKER_APP_PREFIX}-listen-${process.pid}` });
listen.on("error", () => undefined);
await listen.connect();
const pairs = fanoutWorkflows(
  new FakeProvider(sidePool, { before: 0.04, after: 0.04 }),
  new ExecutionMarks(sidePool),
  mode,
);
const engine = createEngine({ db: kyselyOn(pool), leaseMs, rateLimits: { [FANOUT_RATE_LIMIT]: FANOUT_RATE } });
const worker = engine.startWorker({
  workflows: pairs.flatMap((p) => [p.parent, p.child]),
  listen,
  concurrency: 8,
  // Polling is the guarantee; NOTIFY wakes it sooner. Short, so a takeover after a kill and a freed slot come soon.
  intervalMs: 200,
  onError: () => undefined,
});
process.send?.("ready");
process.on("message", (message) => {
  if (message !== "stop") return;
  void worker
    .stop()
    .then(() => listen.end())
    .then(() => Promise.all([pool.end(), sidePool.end()]))
    .finally(() => process.exit(0));
});
