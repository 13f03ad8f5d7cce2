/**
 * One durable-scenario worker process: an engine on its own pool running
 * `startWorker` for the confirmation workflow, woken by NOTIFY on a
 * dedicated connection, until the driver SIGKILLs it (nothing is cleaned
 * up: that is the point) or sends "stop" (a clean stop, at the end).
 * Argument: the database URL. Sends "ready" once the worker runs.
 */
import { createEngine } from "@idempo/core";
import pg from "pg";
import { kyselyOn, openPool, WORKER_APP_PREFIX } from "./database.ts";
import { confirmationWorkflow } from "./workflows/confirmation.ts";

const url = process.argv[2] as string;
const leaseMs = Number(process.argv[3] ?? "1000");
const pool = openPool(url, `${WORKER_APP_PREFIX}-durable-${process.pid}`, 6);
const listen = new pg.Client({ connectionString: url, application_name: `${WORKER_APP_PREFIX}-listen-${process.pid}` });
listen.on("error", () => undefined);
await listen.connect();
const engine = createEngine({ db: kyselyOn(pool), leaseMs });
const worker = engine.startWorker({
  workflows: [confirmationWorkflow],
  listen,
  concurrency: 8,
  // Polling is the guarantee; NOTIFY wakes it sooner. Short, so a takeover after a kill comes soon.
  intervalMs: 300,
  onError: () => undefined,
});
process.send?.("ready");
process.on("message", (message) => {
  if (message !== "stop") return;
  void worker
    .stop()
    .then(() => listen.end())
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
