/**
 * One durable-scenario worker process: an engine on its own pool running
 * `startWorker` for the confirmation workflows, woken by NOTIFY on a
 * dedicated connection, and an outbox relay that delivers their messages
 * to the scenario's webhook receiver, until the driver SIGKILLs it
 * (nothing is cleaned up: that is the point) or sends "stop" (a clean
 * stop, at the end). Arguments: the database URL, the lease in ms, the
 * receiver's URL and its signing secret. Sends "ready" once both run.
 */
import { createEngine } from "@idempo/core";
import { createWebhookSender } from "@idempo/relays/webhook";
import pg from "pg";
import { kyselyOn, openPool, WORKER_APP_PREFIX } from "./database.ts";
import { briefConfirmationWorkflow, confirmationWorkflow, PAYMENT_PENDING } from "./workflows/confirmation.ts";

const url = process.argv[2] as string;
const leaseMs = Number(process.argv[3] ?? "1000");
const receiverUrl = process.argv[4] as string;
const secret = process.argv[5] as string;
const pool = openPool(url, `${WORKER_APP_PREFIX}-durable-${process.pid}`, 8);
const listen = new pg.Client({ connectionString: url, application_name: `${WORKER_APP_PREFIX}-listen-${process.pid}` });
listen.on("error", () => undefined);
await listen.connect();
const engine = createEngine({ db: kyselyOn(pool), leaseMs });
const worker = engine.startWorker({
  workflows: [confirmationWorkflow, briefConfirmationWorkflow],
  listen,
  concurrency: 8,
  // Polling is the guarantee; NOTIFY wakes it sooner. Short, so a takeover after a kill comes soon.
  intervalMs: 300,
  onError: () => undefined,
});
const relay = engine.startRelay({
  handlers: { [PAYMENT_PENDING]: createWebhookSender({ url: receiverUrl, secret, timeoutMs: 2_000 }) },
  concurrency: 4,
  // The receiver refuses some deliveries on purpose: retry soon, and never dead-letter one for that.
  maxAttempts: 100,
  backoffMs: 50,
  maxBackoffMs: 400,
  // A killed relay's claim runs out soon, and another worker's relay delivers the message again.
  leaseMs: 3_000,
  pollIntervalMs: 300,
  onError: () => undefined,
});
process.send?.("ready");
process.on("message", (message) => {
  if (message !== "stop") return;
  void Promise.all([worker.stop(), relay.stop()])
    .then(() => listen.end())
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
