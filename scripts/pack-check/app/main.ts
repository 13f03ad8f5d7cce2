/**
 * A user's program against the installed tarballs: migrate, run the checkout
 * (phase, step, phase) once per key, replay it, refuse a changed request,
 * crash it at every boundary with @idempo/testing, wake a 7-day sleep with
 * its test clock, and (mode `crash`) leave
 * a run stuck in its step for the `idempo` binary to find.
 *
 *   node main.js pg      # DATABASE_URL, through withPreparedStatements(pg.Pool)
 *   node main.js pglite  # an in-memory PGlite
 *   node main.js crash   # DATABASE_URL; dies with SIGKILL inside the charge step
 */
import assert from "node:assert/strict";
import { PGlite } from "@electric-sql/pglite";
import {
  createEngine,
  IdempoError,
  IdempotencyKeyMismatchError,
  type RunResult,
  withPreparedStatements,
  workflow,
} from "@idempo/core";
import { assertExactlyOnce, crashAtEveryBoundary, createTestClock } from "@idempo/testing";
import { Kysely, PostgresDialect, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";
import { z } from "zod";
import { CREATE_ORDERS, checkout, type Database, FakePayments } from "./checkout.js";

const mode = process.argv[2];

function onPg(): Kysely<Database> {
  const connectionString = process.env.DATABASE_URL;
  assert.ok(connectionString, "DATABASE_URL is required");
  const pool = withPreparedStatements(new pg.Pool({ connectionString, max: 4 }));
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

async function onPglite(): Promise<Kysely<Database>> {
  return new Kysely<Database>({ dialect: new PGliteDialect(await PGlite.create()) });
}

async function count(db: Kysely<Database>, query: ReturnType<typeof sql<{ n: number }>>): Promise<number> {
  return Number((await query.execute(db)).rows[0]?.n ?? -1);
}

/** The body of a successful run; anything else fails the check with the whole result. */
function succeeded<B>(result: RunResult<B>): B {
  assert.equal(result.outcome, "succeeded", JSON.stringify(result));
  if (result.outcome !== "succeeded") throw new Error("unreachable");
  return result.body;
}

async function exercise(db: Kysely<Database>, label: string): Promise<void> {
  const engine = createEngine({ db });
  const applied = await engine.migrate();
  assert.ok(applied.length > 0, "migrate() on an empty database applies the packaged migrations");
  assert.deepEqual(await engine.migrate(), [], "a second migrate() has nothing to do");
  await sql.raw(CREATE_ORDERS).execute(db);

  const payments = new FakePayments();
  const wf = checkout((key) => payments.charge(key));
  const input = { cartId: "cart-1", amountCents: 4200 };
  const first = await engine.runOnce(wf, { tenantId: "acme", key: "order-1", input });
  assert.equal(first.status, 201);
  assert.equal(first.replayed, false);
  const body = succeeded(first);
  const again = await engine.runOnce(wf, { tenantId: "acme", key: "order-1", input });
  assert.equal(again.replayed, true);
  assert.deepEqual(succeeded(again), body);

  await assert.rejects(
    engine.runOnce(wf, { tenantId: "acme", key: "order-1", input: { ...input, amountCents: 1 } }),
    (error: unknown) => error instanceof IdempotencyKeyMismatchError && error instanceof IdempoError,
  );
  assert.equal(await count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM orders`), 1);
  assert.equal(payments.charges.size, 1);
  assert.equal(
    await count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM idempo.outbox WHERE topic = 'receipt.email'`),
    1,
  );

  const report = await crashAtEveryBoundary(
    engine,
    wf,
    ({ point }) => ({ cartId: `cart-${point}`, amountCents: 100 }),
    {
      effects: {
        orders: () => count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM orders`),
        charged: () => count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE charge_id IS NOT NULL`),
        charges: () => payments.charges.size,
      },
    },
  );
  assertExactlyOnce(report);

  const week = 7 * 24 * 60 * 60 * 1000;
  const nap = workflow("nap")
    .input(z.object({ n: z.number() }))
    .sleep("nap", week)
    .phase("woke", () => ({ woke: true }))
    .respond(({ state }) => ({ status: 200, body: state }));
  const clock = createTestClock(engine, { workflows: [nap] });
  assert.equal((await engine.runOnce(nap, { tenantId: "acme", key: "nap-1", input: { n: 1 } })).status, 202);
  assert.deepEqual(
    (await clock.advance(week)).resumed.map((r) => [r.key, r.status]),
    [["nap-1", 200]],
  );
  console.log(
    `ok ${label}: migrated ${applied.join(", ")}; checkout ran once, replayed, refused a changed request; ` +
      `${report.boundaries.length} crash boundaries exactly once; a 7-day sleep woken by the test clock`,
  );
}

async function leaveStuck(db: Kysely<Database>): Promise<never> {
  // A short lease, so the run shows as stuck (lease expired) soon after the process dies.
  const engine = createEngine({ db, leaseMs: 1_000 });
  await engine.migrate();
  await sql.raw(CREATE_ORDERS).execute(db);
  const wf = checkout(() => {
    process.kill(process.pid, "SIGKILL");
    throw new Error("unreachable: the process was killed");
  });
  await engine.runOnce(wf, { tenantId: "acme", key: "order-stuck", input: { cartId: "cart-stuck", amountCents: 900 } });
  throw new Error("the run finished although its step killed the process");
}

if (mode === "pg" || mode === "pglite") {
  const db = mode === "pg" ? onPg() : await onPglite();
  try {
    await exercise(db, mode);
  } finally {
    await db.destroy();
  }
} else if (mode === "crash") {
  await leaveStuck(onPg());
} else {
  throw new Error(`unknown mode ${mode}; use pg, pglite or crash`);
}
