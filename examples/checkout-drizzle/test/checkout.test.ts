/**
 * The checkout, crashed at every boundary by `@idempo/testing`, on each data
 * layer: Drizzle on node-postgres and on PGlite (this example's own), plain
 * node-postgres and Kysely. Each must count one order, paid, one charge and
 * one receipt queued per run at every boundary, and the reports of the
 * layers must be the same, boundary by boundary.
 */
import { PGlite } from "@electric-sql/pglite";
import type { DataLayer, Engine } from "@idempo/core";
import { createEngine, fromDrizzle, fromNodePostgres } from "@idempo/core";
import type { CrashReport } from "@idempo/testing";
import { assertExactlyOnce, crashAtEveryBoundary } from "@idempo/testing";
import { drizzle as onNodePostgres } from "drizzle-orm/node-postgres";
import { drizzle as onPglite } from "drizzle-orm/pglite";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { useClonedDatabase } from "../../../packages/testkit/src/index.ts";
import { checkoutWorkflow } from "../src/checkout.ts";
import type { OrderWrites } from "../src/orders.ts";
import { drizzleOrders } from "../src/orders.ts";
import { FakePaymentProvider } from "../src/payments.ts";
import { ORDERS_DDL, schema } from "../src/schema.ts";
import { kyselyOrders, nodePostgresOrders } from "./support/other-layers.ts";

const clone = useClonedDatabase("idempo_drizzle_t", {
  prepare: (db) =>
    sql
      .raw(ORDERS_DDL)
      .execute(db)
      .then(() => {}),
});
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/** A data layer under test, with the reads the effects are counted by (run on the same database). */
interface Setup {
  readonly data: DataLayer;
  readonly writes: OrderWrites<never>;
  count(text: string, tenantId: string): Promise<number>;
  readonly migrate?: boolean;
}

function pool(): pg.Pool {
  const p = new pg.Pool({ connectionString: clone.url, max: 4 });
  p.on("error", () => undefined);
  closers.push(() => p.end());
  return p;
}

const countOn = (p: pg.Pool) => async (text: string, tenantId: string) =>
  (await p.query<{ n: number }>(text, [tenantId])).rows[0]?.n ?? -1;

const layers: Record<string, () => Promise<Setup>> = {
  "Drizzle on node-postgres": async () => {
    const p = pool();
    return { data: fromDrizzle(onNodePostgres(p, { schema })) as DataLayer, writes: drizzleOrders, count: countOn(p) };
  },
  "Drizzle on PGlite": async () => {
    const pglite = await PGlite.create();
    closers.push(() => pglite.close());
    await pglite.exec(ORDERS_DDL);
    const count = async (text: string, tenantId: string) =>
      (await pglite.query<{ n: number }>(text, [tenantId])).rows[0]?.n ?? -1;
    return {
      data: fromDrizzle(onPglite(pglite, { schema })) as DataLayer,
      writes: drizzleOrders,
      count,
      migrate: true,
    };
  },
  "plain node-postgres": async () => {
    const p = pool();
    return {
      data: fromNodePostgres(p) as DataLayer,
      writes: nodePostgresOrders as OrderWrites<never>,
      count: countOn(p),
    };
  },
  Kysely: async () => {
    const p = pool();
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: p }) });
    return { data: db as unknown as DataLayer, writes: kyselyOrders as OrderWrites<never>, count: countOn(p) };
  },
};

const ORDERS = "SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1";
const PAID = "SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1 AND status = 'paid'";
const RECEIPTS = "SELECT count(*)::int AS n FROM idempo.outbox WHERE tenant_id = $1 AND topic = 'receipt.email'";

const reports = new Map<string, CrashReport>();

describe("the checkout crashed at every boundary", () => {
  for (const [name, make] of Object.entries(layers)) {
    it(`on ${name}: one order, paid, one charge and one receipt per run`, async () => {
      const setup = await make();
      const engine: Engine = createEngine({ db: setup.data as never, leaseMs: 30_000 });
      if (setup.migrate) await engine.migrate();
      const payments = new FakePaymentProvider();
      const tenantId = name.replace(/\W+/g, "_").toLowerCase();
      const report = await crashAtEveryBoundary(
        engine,
        checkoutWorkflow(payments, setup.writes),
        ({ key }) => ({ cartId: `cart-${key}`, amountCents: 4999 }),
        {
          tenantId,
          effects: {
            orders: () => setup.count(ORDERS, tenantId),
            paid: () => setup.count(PAID, tenantId),
            charges: () => payments.chargesMade,
            receipts: () => setup.count(RECEIPTS, tenantId),
          },
        },
      );
      assertExactlyOnce(report);
      expect(report.boundaries.length).toBeGreaterThanOrEqual(6);
      reports.set(name, report);
    });
  }

  it("the same on every data layer, boundary by boundary", () => {
    const shape = (r: CrashReport) =>
      [r.baseline, ...r.boundaries].map((b) => ({
        point: b.point,
        outcome: b.outcome,
        status: b.status,
        attempts: b.attempts,
        effects: b.effects,
      }));
    const [first, ...others] = [...reports.values()].map(shape);
    expect(reports.size).toBe(Object.keys(layers).length);
    for (const other of others) expect(other).toEqual(first);
  });
});
