import { CamelCasePlugin, Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../src/index.ts";
import { useTestDatabase } from "./support/db.ts";

// An application's pool may parse values its own way (its `types` option:
// booleans, timestamps, JSON and numbers left as the text the server sent,
// bigints as BigInt), or have every row sent in binary (`binary: true`).
// That is for the application's rows: the engine reads its own as text with
// node-postgres' default parsers, and the phase's `tx` keeps the pool's
// parsing (and the Kysely's plugins) for the workflow's own queries.
const t = useTestDatabase();

const AS_TEXT = (value: string) => `text:${value}`;
/** bool, int2, int4, int8, float8, numeric, json, jsonb, timestamp, timestamptz, text[]. */
const OVERRIDDEN = new Map<number, (value: string) => unknown>([
  [16, AS_TEXT],
  [21, AS_TEXT],
  [23, AS_TEXT],
  [20, (value) => BigInt(value)],
  [701, AS_TEXT],
  [1700, AS_TEXT],
  [114, AS_TEXT],
  [3802, AS_TEXT],
  [1114, AS_TEXT],
  [1184, AS_TEXT],
  [1009, AS_TEXT],
]);
const types = {
  getTypeParser: (oid: number, format?: "text" | "binary") =>
    (format ?? "text") === "text"
      ? (OVERRIDDEN.get(oid) ?? pg.types.getTypeParser(oid, "text"))
      : pg.types.getTypeParser(oid, format),
};

/** A latch: a promise and the function that resolves it. */
function latch(): { promise: Promise<void>; open: () => void } {
  let open = () => undefined as void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** The workflows of one pool's tests, with what their phase saw and the latches that hold it. */
function workflows() {
  const seenInPhase: unknown[] = [];
  const entered = latch();
  const release = latch();
  const order = workflow("typed_order")
    .phase("create", async ({ tx, key, tenantId }) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 5)`.execute(
        tx,
      );
      const { rows } = await sql<{ cartId: string; paid: unknown }>`
        SELECT cart_id, status = 'paid' AS paid FROM orders WHERE id = ${key}`.execute(tx);
      seenInPhase.push(rows[0]);
      if (key.endsWith("held")) {
        entered.open();
        await release.promise;
      }
      return { orderId: key, at: "2026-01-02T03:04:05.000Z", ok: true, n: 7 };
    })
    .step("charge", ({ state }) => ({ chargeId: `ch_${state.orderId}` }))
    .respond(({ state }) => ({
      status: 201,
      body: { chargeId: state.chargeId, ok: state.ok, n: state.n, at: state.at },
    }));

  const failing = workflow("typed_failing")
    .phase("create", async ({ tx, key, tenantId }) => {
      await sql`INSERT INTO orders (id, tenant_id, cart_id, amount_cents) VALUES (${key}, ${tenantId}, 'c', 5)`.execute(
        tx,
      );
      throw new Error("the phase fails after its write");
    })
    .respond(() => ({ status: 201, body: {} }));
  return { order, failing, seenInPhase, entered, release };
}

describe.each([
  { pool: "its own type parsers", options: { types }, paid: "text:f", p: "ty" },
  { pool: "binary: true", options: { binary: true }, paid: false, p: "bin" },
])("a pool with $pool, under a Kysely with CamelCasePlugin", ({ options, paid, p }) => {
  let db: Kysely<unknown>;
  beforeAll(() => {
    const pool = new pg.Pool({ connectionString: t.url, max: 4, ...options });
    pool.on("error", () => undefined);
    db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] });
  });
  afterAll(() => db.destroy());
  const { order, failing, seenInPhase, entered, release } = workflows();

  it("runs and replays a key with the stored response unchanged; the phase's tx keeps the pool's parsers", async () => {
    const engine = createEngine({ db });
    const body = { chargeId: `ch_${p}-o1`, ok: true, n: 7, at: "2026-01-02T03:04:05.000Z" };
    const first = await engine.runOnce(order, { tenantId: "ty", key: `${p}-o1`, input: { n: 1 } });
    expect(first).toEqual(expect.objectContaining({ status: 201, replayed: false, body }));
    const again = await engine.runOnce(order, { tenantId: "ty", key: `${p}-o1`, input: { n: 1 } });
    expect(again).toEqual(expect.objectContaining({ status: 201, replayed: true, body }));
    expect(seenInPhase).toEqual([{ cartId: "c", paid }]);
    const record = await engine.inspect("ty", `${p}-o1`);
    expect(record).toMatchObject({ status: "completed", workflow: "typed_order", recoveryPoint: "charge" });
    expect(record?.createdAt).toBeInstanceOf(Date);
    expect(record?.updatedAt).toBeInstanceOf(Date);
  });

  it("reads a live lease right: a duplicate gets a 409 with a number to wait, and inspect a remaining lease", async () => {
    const engine = createEngine({ db, leaseMs: 30_000 });
    const running = engine.runOnce(order, { tenantId: "ty", key: `${p}-held`, input: { n: 2 } });
    // A run that ends before it holds the phase fails the test at once, rather than leaving the latch shut.
    await Promise.race([
      entered.promise,
      running.then(() => Promise.reject(new Error("the run never held its phase"))),
    ]);
    try {
      const refused = await engine.runOnce(order, { tenantId: "ty", key: `${p}-held`, input: { n: 2 } }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(IdempotencyKeyInProgressError);
      const wait = (refused as IdempotencyKeyInProgressError).retryAfterMs;
      expect(typeof wait).toBe("number");
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(30_000);
      const record = await engine.inspect("ty", `${p}-held`);
      expect(record).toMatchObject({ status: "in_flight" });
      expect(record?.leaseRemainingMs).toBeGreaterThan(0);
      expect(record?.leaseRemainingMs).toBeLessThanOrEqual(30_000);
    } finally {
      release.open();
    }
    expect(await running).toMatchObject({ status: 201, body: { chargeId: `ch_${p}-held` } });
  });

  it("a phase that throws after its write leaves neither the write nor a recovery point", async () => {
    const engine = createEngine({ db });
    await expect(engine.runOnce(failing, { tenantId: "ty", key: `${p}-f1`, input: {} })).rejects.toThrow(
      "the phase fails after its write",
    );
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE id = ${`${p}-f1`}`.execute(
      t.db,
    );
    expect(rows[0]?.n).toBe(0);
    const record = await engine.inspect("ty", `${p}-f1`);
    expect(record?.recoveryPoint ?? null).toBeNull();
  });
});
