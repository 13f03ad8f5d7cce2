/**
 * The TypeScript worker of the Python billing service: migrates idempo's
 * schema, creates the business tables, and executes the runs the Python
 * side enqueues and signals through SQL until SIGTERM or SIGINT. Its start
 * registers `invoice_payment` for the SQL function `enqueue`.
 *
 *   DATABASE_URL=postgres://... pnpm worker
 *
 * It prints `worker ready` once it listens for due runs.
 */
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type { Database } from "./billing.js";
import { createBillingTables } from "./billing.js";
import { invoicePayment } from "./workflow.js";

const url = process.env.DATABASE_URL;
if (!url) {
  console.error("set DATABASE_URL (a PostgreSQL server)");
  process.exit(2);
}
const db = new Kysely<Database>({
  dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 4 }) }),
});
const listen = new pg.Client({ connectionString: url });
await listen.connect();
const engine = createEngine({ db });
await engine.migrate();
await createBillingTables(db);
const worker = engine.startWorker({
  workflows: [invoicePayment],
  intervalMs: Number(process.env.WORKER_INTERVAL_MS ?? 1_000),
  listen,
  onError: (error) => console.error(`worker: ${String(error)}`),
});
console.log("worker ready");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    worker
      .stop()
      .then(() => Promise.all([db.destroy(), listen.end()]))
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  });
}
