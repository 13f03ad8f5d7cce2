// The Drizzle-only consumer of scripts/pack-check.mjs: @idempo/core with
// Drizzle and no Kysely installed. A checkout whose phases write with
// Drizzle's transaction, on pg (DATABASE_URL) or on PGlite; a crash after
// the charge, a takeover, a replay; one order, paid, one charge.
//   node out/main.js pg | pglite
import { PGlite } from "@electric-sql/pglite";
import type { TxOf } from "@idempo/core";
import { createEngine, fromDrizzle, workflow } from "@idempo/core";
import { CrashSignal, setFaultHook } from "@idempo/core/internal";
import { count, eq } from "drizzle-orm";
import { drizzle as onNodePostgres } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { drizzle as onPglite } from "drizzle-orm/pglite";
import pg from "pg";
import { z } from "zod";

const orders = pgTable("drizzle_orders", {
  id: text("id").primaryKey(),
  amountCents: integer("amount_cents").notNull(),
  chargeId: text("charge_id"),
});
const schema = { orders };
const DDL = `CREATE TABLE IF NOT EXISTS drizzle_orders (id text PRIMARY KEY, amount_cents integer NOT NULL, charge_id text)`;

async function open(kind: string) {
  if (kind === "pg") {
    const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
    await pool.query(DDL);
    return { db: onNodePostgres(pool, { schema }), close: () => pool.end() };
  }
  const pglite = await PGlite.create();
  await pglite.exec(DDL);
  return { db: onPglite(pglite, { schema }), close: () => pglite.close() };
}

async function main(kind: string): Promise<void> {
  const { db, close } = await open(kind);
  const data = fromDrizzle(db);
  const engine = createEngine({ db: data, leaseMs: 500 });
  await engine.migrate();
  // A provider that keeps one charge per idempotency key, as Stripe does.
  const charges = new Map<string, string>();
  const checkout = workflow<TxOf<typeof data>>("drizzle_checkout")
    .input(z.object({ orderId: z.string(), amountCents: z.number().int() }))
    .phase("create_order", async ({ tx, input }) => {
      await tx.insert(orders).values({ id: input.orderId, amountCents: input.amountCents });
    })
    .step("charge", ({ idempotencyKey }) => {
      if (!charges.has(idempotencyKey)) charges.set(idempotencyKey, `ch_${charges.size + 1}`);
      return { chargeId: charges.get(idempotencyKey) as string };
    })
    .phase("record_charge", async ({ tx, input, state }) => {
      await tx.update(orders).set({ chargeId: state.chargeId }).where(eq(orders.id, input.orderId));
    })
    .respond(({ state }) => ({ status: 201, body: { chargeId: state.chargeId } }));
  const request = { tenantId: "acme", key: `drizzle-${kind}`, input: { orderId: `o-${kind}`, amountCents: 1999 } };
  try {
    setFaultHook(engine, (point) => {
      if (point === "called:step:charge") throw new CrashSignal(point);
    });
    await engine.runOnce(checkout, request).then(
      () => Promise.reject(new Error("the crash did not happen")),
      (error: unknown) => (error instanceof CrashSignal ? undefined : Promise.reject(error)),
    );
    setFaultHook(engine, undefined);
    await new Promise((r) => setTimeout(r, 600));
    const first = await engine.runOnce(checkout, request);
    const replay = await engine.runOnce(checkout, request);
    const [row] = await db.select({ n: count() }).from(orders).where(eq(orders.id, request.input.orderId));
    const [paid] = await db.select().from(orders).where(eq(orders.id, request.input.orderId));
    console.log(
      `${kind}: ${first.status} then replayed=${replay.replayed}; orders ${row?.n}, charge ${paid?.chargeId}`,
    );
    const charged = (first.body as { chargeId?: string } | null)?.chargeId;
    if (first.status !== 201 || !replay.replayed || row?.n !== 1 || paid?.chargeId !== charged || charges.size !== 1) {
      throw new Error(`${kind}: expected one order, paid by the one charge, and a replay`);
    }
  } finally {
    await close();
  }
}

await main(process.argv[2] ?? "pglite");
