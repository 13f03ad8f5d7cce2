/**
 * The cases of a pool that parses values its own way (its `types` option:
 * booleans, timestamps, JSON and numbers left as the text the server sent,
 * bigints as BigInt) or has every row sent in binary (`binary: true`), on
 * any data layer over node-postgres. That is for the application's rows:
 * the engine reads its own as text with node-postgres' default parsers, and
 * the phase's `tx` keeps the layer's parsing for the workflow's own queries.
 */
import { sql } from "kysely";
import pg from "pg";
import { expect, it } from "vitest";
import type { EngineOptions, WithTx } from "../../src/index.ts";
import { createEngine, IdempotencyKeyInProgressError, workflow } from "../../src/index.ts";
import type { TestDatabase } from "./db.ts";

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

/** A pool's `types` that leave most values as the server's text (and bigints as BigInt). */
const types = {
  getTypeParser: (oid: number, format?: "text" | "binary") =>
    (format ?? "text") === "text"
      ? (OVERRIDDEN.get(oid) ?? pg.types.getTypeParser(oid, "text"))
      : pg.types.getTypeParser(oid, format),
};

/** The two pools: the options to give `pg.Pool`, and the prefix of the keys of their runs. */
export const POOLS = [
  { pool: "its own type parsers", options: { types }, p: "ty" },
  { pool: "binary: true", options: { binary: true }, p: "bin" },
] as const;

/** A latch: a promise and the function that resolves it. */
function latch(): { promise: Promise<void>; open: () => void } {
  let open = () => undefined as void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** A data layer's part in the cases: its `db`, and a phase's write and read with its `tx`. */
export interface TypedLayer<Tx> {
  db(): EngineOptions<unknown>["db"];
  /** Writes order `key` of `tenantId` (cart 'c', 5 cents) on `tx`. */
  insert(tx: Tx, key: string, tenantId: string): Promise<unknown>;
  /** Reads back, on `tx`, the row of `SELECT cart_id, status = 'paid' AS paid` of order `key`, as the layer reads it. */
  readBack(tx: Tx, key: string): Promise<unknown>;
}

/**
 * The three cases on one pool: a run and its replay, a live lease, and a
 * phase that fails after its write.
 *
 * @param layer the data layer on the pool.
 * @param p the prefix of the run's keys (unique per pool and layer).
 * @param phaseRow what the phase's read of its order gives on this pool and layer.
 */
export function typeParserCases<Tx>(t: TestDatabase, layer: TypedLayer<Tx>, p: string, phaseRow: unknown): void {
  const seenInPhase: unknown[] = [];
  const entered = latch();
  const release = latch();
  const order = workflow<WithTx<Tx>>("typed_order")
    .phase("create", async ({ tx, key, tenantId }) => {
      await layer.insert(tx, key, tenantId);
      seenInPhase.push(await layer.readBack(tx, key));
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

  const failing = workflow<WithTx<Tx>>("typed_failing")
    .phase("create", async ({ tx, key, tenantId }) => {
      await layer.insert(tx, key, tenantId);
      throw new Error("the phase fails after its write");
    })
    .respond(() => ({ status: 201, body: {} }));

  it("runs and replays a key with the stored response unchanged; the phase's tx keeps the layer's parsing", async () => {
    const engine = createEngine({ db: layer.db() });
    const body = { chargeId: `ch_${p}-o1`, ok: true, n: 7, at: "2026-01-02T03:04:05.000Z" };
    const first = await engine.runOnce(order, { tenantId: "ty", key: `${p}-o1`, input: { n: 1 } });
    expect(first).toEqual(expect.objectContaining({ status: 201, replayed: false, body }));
    const again = await engine.runOnce(order, { tenantId: "ty", key: `${p}-o1`, input: { n: 1 } });
    expect(again).toEqual(expect.objectContaining({ status: 201, replayed: true, body }));
    expect(seenInPhase).toEqual([phaseRow]);
    const record = await engine.inspect("ty", `${p}-o1`);
    expect(record).toMatchObject({ status: "completed", workflow: "typed_order", recoveryPoint: "charge" });
    expect(record?.createdAt).toBeInstanceOf(Date);
    expect(record?.updatedAt).toBeInstanceOf(Date);
  });

  it("reads a live lease right: a duplicate gets a 409 with a number to wait, and inspect a remaining lease", async () => {
    const engine = createEngine({ db: layer.db(), leaseMs: 30_000 });
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
    const engine = createEngine({ db: layer.db() });
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
}
