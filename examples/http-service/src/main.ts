/**
 * A small payments API with Idempotency-Key support: `pnpm start`, then
 * follow the curl walkthrough in README.md. Runs on an in-memory PGlite
 * unless DATABASE_URL is set.
 */
import { serve } from "@hono/node-server";
import { createEngine } from "@idempo/core";
import { buildApp } from "./app.js";
import { openDatabase } from "./database.js";

const port = Number(process.env.PORT ?? 3000);
const { db, label } = await openDatabase(process.env.DATABASE_URL);
// A short lease keeps Retry-After small in the walkthrough; it is renewed while a request works.
const engine = createEngine({ db, leaseMs: 5_000 });
await engine.migrate();

const server = serve({ fetch: buildApp(engine, db).fetch, port, hostname: "127.0.0.1" }, (info) => {
  console.log(`payments API on http://127.0.0.1:${info.port} (${label}); Ctrl-C to stop`);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server.close();
    db.destroy().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
