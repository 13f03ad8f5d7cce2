/**
 * A worker process for the 3-D Secure checkout: executes the runs that
 * become due (a signalled wait, a wait past its timeout) until it gets
 * SIGTERM or SIGINT, or is killed. Any number may run at once, in any
 * number of processes; each due run is executed by one of them.
 *
 *   DATABASE_URL=postgres://... PSP_URL=http://127.0.0.1:4010 pnpm worker
 *
 * CONFIRM_TIMEOUT_MS must be the web process's value (the workflow's
 * definition is the same in every process). It prints `worker ready` once
 * it listens for due runs.
 */
import { createEngine } from "@idempo/core";
import { openDatabase } from "./database.js";
import { PspClient } from "./psp-client.js";
import { checkout3ds } from "./workflow.js";

const url = process.env.DATABASE_URL;
const pspUrl = process.env.PSP_URL;
if (!url || !pspUrl) {
  console.error("set DATABASE_URL (a PostgreSQL server) and PSP_URL (the payment provider)");
  process.exit(2);
}
const database = await openDatabase(url);
const engine = createEngine({ db: database.db });
const flow = checkout3ds(new PspClient(pspUrl), {
  confirmTimeoutMs: Number(process.env.CONFIRM_TIMEOUT_MS ?? 900_000),
});
const worker = engine.startWorker({
  workflows: [flow],
  intervalMs: Number(process.env.WORKER_INTERVAL_MS ?? 1_000),
  listen: database.listen,
  onError: (error) => console.error(`worker: ${String(error)}`),
});
console.log("worker ready");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    worker
      .stop()
      .then(() => database.close())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  });
}
