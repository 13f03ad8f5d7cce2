/**
 * Fault kind "COMMIT in doubt": the connection breaks at a phase's COMMIT.
 * During a failover this happens to about one connection per writer: the
 * COMMIT reached the dying primary, and its standby may or may not have it.
 * The engine cannot know, so it must neither re-run the phase in place (a
 * COMMIT that landed would then commit the phase twice) nor assume it
 * landed. The caller gets DatabaseUnavailableError whose `inDoubt` and
 * message say so, and the next attempt on the key reads the run's record:
 * it carries on after the phase when the COMMIT landed, and runs the phase
 * once when it did not. Each way, one order.
 *
 * The break is made in node-postgres' client: the COMMIT (or the phase's
 * commit call in autocommit) is run and its answer thrown away ("landed"),
 * or the connection is cut before it is sent ("lost"); either way the
 * socket is destroyed and the call fails as node-postgres reports a lost
 * connection.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine } from "../src/index.ts";
import { createEngine, DatabaseUnavailableError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

const t = useTestDatabase();
const T = "doubt";
const LEASE_MS = 300;

type Break = { readonly at: "COMMIT" | "commit_phase"; readonly landed: boolean };
let breakNext: Break | undefined;

/** A pool on the file's database whose clients can be told to break at the next COMMIT. */
function breakablePool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: unknown }).query = async (...args: unknown[]) => {
      const first = args[0] as string | { text?: unknown };
      const text = String(typeof first === "string" ? first : first?.text);
      const b = breakNext;
      if (b && (b.at === "COMMIT" ? text === "COMMIT" : text.includes("idempo:commit_phase"))) {
        breakNext = undefined;
        if (b.landed) await query(...args);
        const ended = new Promise((resolve) => client.once("end", resolve));
        (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
        await ended;
        throw new Error("Connection terminated unexpectedly");
      }
      return query(...args);
    };
  });
  return pool;
}

let db: Kysely<unknown>;
let engine: Engine;
beforeAll(() => {
  db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: breakablePool(t.url) }) });
  engine = createEngine({ db });
});
afterAll(async () => {
  await db.destroy();
});

const ran = new Map<string, number>();

/**
 * A phase writing an order with a fresh id (so a phase committed twice
 * leaves two), in `tx` or, with `usesTx` false, not at all; then a phase
 * that only records itself, so that a run whose first COMMIT landed is
 * still in flight and its retry has to carry on after it.
 */
function orderWorkflow(name: string, usesTx: boolean) {
  return workflow(name, { leaseMs: LEASE_MS })
    .phase("order", async ({ tx, key, tenantId }) => {
      ran.set(key, (ran.get(key) ?? 0) + 1);
      const id = `o-${crypto.randomUUID()}`;
      if (usesTx) {
        await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${id}, ${tenantId}, ${key}, 1)`.execute(
          tx,
        );
      }
      return { orderId: id };
    })
    .phase("confirm", () => ({ confirmed: true }))
    .respond(({ state }) => ({ status: 201, body: { orderId: state.orderId } }));
}

async function ordersOf(key: string): Promise<string[]> {
  const res = await sql<{ id: string }>`SELECT id FROM orders WHERE cart_id = ${key}`.execute(t.db);
  return res.rows.map((r) => r.id);
}

async function breakAndRetry(wfName: string, usesTx: boolean, key: string, b: Break) {
  const wf = orderWorkflow(wfName, usesTx);
  breakNext = b;
  const err = await engine.runOnce(wf, { tenantId: T, key, input: {} }).catch((e: unknown) => e);
  expect(breakNext).toBeUndefined();
  // The retry, as a client makes it: the same key, waiting out the cut-off attempt's lease.
  const res = await engine.runOnce(wf, { tenantId: T, key, input: {}, waitInFlightMs: 30_000 });
  return { err, res };
}

describe("a phase's COMMIT whose connection broke", () => {
  it("landed: the caller is told it may have; the retry carries on after the phase, which ran once", async () => {
    const { err, res } = await breakAndRetry("doubt_landed", true, "k-landed", { at: "COMMIT", landed: true });
    // One order, the one the answer names: a phase run again in place would have made a second.
    expect(await ordersOf("k-landed")).toEqual([(res.body as { orderId: string }).orderId]);
    expect(ran.get("k-landed")).toBe(1);
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as DatabaseUnavailableError).inDoubt).toBe("the COMMIT of phase 'order'");
    expect((err as Error).message).toContain("may have landed");
    expect(res).toMatchObject({ status: 201, replayed: false });
  });

  it("lost before it was sent: told the same; the retry runs the phase once more, one order", async () => {
    const { err, res } = await breakAndRetry("doubt_lost", true, "k-lost", { at: "COMMIT", landed: false });
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as DatabaseUnavailableError).inDoubt).toBe("the COMMIT of phase 'order'");
    expect(ran.get("k-lost")).toBe(2);
    expect(res).toMatchObject({ status: 201, replayed: false });
    expect(await ordersOf("k-lost")).toEqual([(res.body as { orderId: string }).orderId]);
  });

  it("a phase without writes commits in autocommit: its commit call is in doubt the same way", async () => {
    const { err, res } = await breakAndRetry("doubt_alone", false, "k-alone", { at: "commit_phase", landed: true });
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect((err as DatabaseUnavailableError).inDoubt).toBe("the call of commit_phase of phase 'order'");
    expect(ran.get("k-alone")).toBe(1);
    // The retry took the run over after 'order' and answered with what that phase committed.
    const rec = await engine.inspect(T, "k-alone");
    expect(rec?.attempt).toBe(2);
    expect(res).toMatchObject({ status: 201, replayed: false });
    expect(res.body).toEqual({ orderId: (rec?.state as { orderId?: string } | undefined)?.orderId });
  });
});
