/**
 * A user's process against the installed tarballs whose connection dies in
 * the middle of a phase, set up the way the README shows. A phase reads its
 * backend's pid and waits; another connection ends that backend with
 * pg_terminate_backend; once node-postgres has noticed, the phase goes on.
 * node-postgres reports the loss as an `'error'` event on the checked-out
 * client, and an `'error'` event nobody listens to ends the process, so the
 * pack check runs this as a child and a crash shows as its exit code.
 *
 *   node connection-loss.js wrapped  # withPreparedStatements(new pg.Pool(...))
 *   node connection-loss.js plain    # new pg.Pool(...) with the README's listener line
 *
 * It checks that runOnce rejects with DatabaseUnavailableError, that the
 * retry after the (short) lease completes the run, and that the phase's
 * business row exists once. Exit 0 and an `ok` line when all holds.
 */
import assert from "node:assert/strict";
import { createEngine, IdempoError, type RunResult, withPreparedStatements, workflow } from "@idempo/core";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";

interface Database {
  connection_loss_orders: { key: string; mode: string };
}

const mode = process.argv[2];
if (mode !== "wrapped" && mode !== "plain") throw new Error(`unknown mode ${mode}; use wrapped or plain`);
const connectionString = process.env.DATABASE_URL;
assert.ok(connectionString, "DATABASE_URL is required");
// A hang is a failure too, with its own exit code; the timer never keeps a finished process alive.
setTimeout(() => {
  console.error(`connection-loss ${mode}: still running after 60 s`);
  process.exit(3);
}, 60_000).unref();

/** A promise with its resolve at hand, for the phase and this process to hand each other the turn. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const raw = new pg.Pool({ connectionString, max: 2 });
// When each client's connection has ended on this side: only then has node-postgres emitted 'error'.
// An 'end' listener does not keep an 'error' event from crashing the process.
const ended = new Map<number, Promise<void>>();
raw.on("connect", (client) => {
  const pid = (client as pg.PoolClient & { processID?: number }).processID ?? -1;
  ended.set(pid, new Promise<void>((resolve) => client.once("end", () => resolve())));
});
if (mode === "plain") {
  // The README's line for a plain pool.
  raw.on("error", () => {}).on("connect", (client) => client.on("error", () => {}));
}
const pool = mode === "wrapped" ? withPreparedStatements(raw) : raw;
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
const admin = new pg.Client({ connectionString });
await admin.connect();

const key = `loss-${mode}-${process.pid}-${Date.now().toString(36)}`;
const phaseBackend = deferred<number>();
const goOn = deferred<void>();
let attempts = 0;
const wf = workflow<Database>("connection_loss")
  .phase("write", async ({ tx }) => {
    attempts += 1;
    await tx.insertInto("connection_loss_orders").values({ key, mode }).execute();
    if (attempts === 1) {
      const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(tx);
      phaseBackend.resolve(Number(rows[0]?.pid));
      await goOn.promise;
    }
    return { written: true };
  })
  .respond(() => ({ status: 201, body: { key } }));

const engine = createEngine({ db, leaseMs: 300 });
try {
  await engine.migrate();
  // Both setups run at once, and two concurrent CREATE TABLE IF NOT EXISTS can collide.
  await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('connection_loss_orders'))`.execute(trx);
    await sql`CREATE TABLE IF NOT EXISTS connection_loss_orders (key text NOT NULL, mode text NOT NULL)`.execute(trx);
  });
  const request = { tenantId: "pack-check", key, input: {} };

  const first = engine.runOnce(wf, request).then(
    (result) => ({ rejected: false as const, result }),
    (error: unknown) => ({ rejected: true as const, error }),
  );
  const pid = await Promise.race([phaseBackend.promise, first.then(() => -1)]);
  if (pid <= 0) throw new Error(`the phase never reported its backend: ${JSON.stringify(await first)}`);
  const { rows } = await admin.query<{ done: boolean }>("SELECT pg_terminate_backend($1) AS done", [pid]);
  assert.equal(rows[0]?.done, true, `pg_terminate_backend(${pid}) found no such backend`);
  const end = ended.get(pid);
  assert.ok(end, `no pool client has backend ${pid}`);
  await end;
  goOn.resolve();

  const outcome = await first;
  assert.ok(outcome.rejected, `runOnce resolved after its backend was terminated: ${JSON.stringify(outcome)}`);
  const error = outcome.error;
  assert.ok(error instanceof IdempoError, `runOnce rejected with ${String(error)}, not an IdempoError`);
  assert.equal(error.code, "database_unavailable", `runOnce rejected with ${error.code}: ${error.message}`);
  assert.equal(error.name, "DatabaseUnavailableError");

  // The retry a client makes: while the lease of the cut-off attempt runs, the key is in progress.
  const deadline = Date.now() + 30_000;
  let retried: RunResult<{ key: string }> | undefined;
  let waits = 0;
  while (retried === undefined) {
    try {
      retried = await engine.runOnce(wf, request);
    } catch (caught) {
      if (!(caught instanceof IdempoError) || caught.code !== "key_in_progress" || Date.now() > deadline) throw caught;
      waits += 1;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  assert.equal(retried.outcome, "succeeded", JSON.stringify(retried));
  assert.equal(retried.status, 201);
  assert.equal(retried.replayed, false);
  const replay = await engine.runOnce(wf, request);
  assert.equal(replay.replayed, true);
  const count = await db
    .selectFrom("connection_loss_orders")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("key", "=", key)
    .executeTakeFirstOrThrow();
  assert.equal(Number(count.n), 1, "the phase's row exists exactly once");
  console.log(
    `ok ${mode}: backend ${pid} terminated mid-phase, process alive, runOnce raised ${error.code}; ` +
      `the retry after the lease (${waits} in-progress answers) completed once, one row`,
  );
} finally {
  await admin.end();
  await db.destroy();
}
