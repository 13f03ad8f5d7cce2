/**
 * The PostgreSQL side of the bench: migrate the scratch database, record
 * the engine's statements per path, seed the keys the replay, conflict and
 * sweeper cells use, and hand out one pool per concurrency level.
 */
import type { Engine } from "@idempo/core";
import { createEngine, IdempotencyKeyInProgressError, withPreparedStatements } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type { NewKeyShape } from "./new-key-shapes.js";
import { checkShapes, newKeyShapes } from "./new-key-shapes.js";
import type { Replica, Statement } from "./replica.js";
import { replicate, StatementRecorder, sendReplica } from "./replica.js";
import {
  HELD_IN_FLIGHT,
  INPUT,
  ORDERS_DDL,
  orderOnce,
  secondOrderId,
  seedCopies,
  TENANT,
  threeItems,
  threeWrites,
} from "./workload.js";

/** Completed keys the replay cells pick from at random. */
export const REPLAY_KEYS = 20_000;
/** In-flight keys under a long lease, for the 409 cells. */
export const BUSY_KEYS = 2_000;

interface Replicas {
  readonly newKey: Replica;
  readonly replay: Replica;
  readonly conflict: Replica;
  readonly three: Replica;
}

export interface PgBench {
  readonly url: string;
  /** Two connections for seeding and checks, outside the measured pools. */
  readonly admin: pg.Pool;
  readonly replicas: Replicas;
  /** Statements one phase/step/phase with two business INSERTs sends (BEGIN and COMMIT counted). */
  readonly equalWorkStatements: number;
  /** Other shapes of the new key's statements (round trips, commits), checked like the replicas. */
  readonly shapes: readonly NewKeyShape[];
  /**
   * One pg pool of `size` connections, shared by the raw cells and the
   * engine of that size; they never run at the same time.
   */
  pool(size: number): pg.Pool;
  /** An engine whose Kysely runs on `pool(size)`; `named` sends its statements as prepared ones. */
  engine(size: number, named?: boolean): Engine;
  close(): Promise<void>;
}

export function openPool(url: string, max: number): pg.Pool {
  // Idle connections stay open between cells, so prepared statements survive.
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 0 });
  // pool.end() resolves before every socket is closed; a backend that the
  // final DROP DATABASE ... WITH (FORCE) terminates then reports an error on
  // an idle client, which would otherwise crash the process.
  pool.on("error", () => undefined);
  return pool;
}

/**
 * Record the replay (of `replay`/`rk-1`), the 409 (on `busy`/`bk-1`, which
 * must be refused) and a phase/step/phase on the new key `threeKey`: the
 * paths recorded after the seeded keys exist, on PostgreSQL and on PGlite.
 */
export async function recordSeededPaths(
  recorder: StatementRecorder,
  engine: Engine,
  threeKey: string,
): Promise<{ replayRun: Statement[]; conflictRun: Statement[]; threeRun: Statement[] }> {
  const replayRun = await recorder.record(() =>
    engine.runOnce(orderOnce, { tenantId: "replay", key: "rk-1", input: INPUT }),
  );
  const conflictRun = await recorder.record(() =>
    engine.runOnce(orderOnce, { tenantId: "busy", key: "bk-1", input: INPUT }).then(
      () => Promise.reject(new Error("a key under a valid lease was not refused")),
      (error: unknown) => {
        if (!(error instanceof IdempotencyKeyInProgressError)) throw error;
      },
    ),
  );
  const threeRun = await recorder.record(() =>
    engine.runOnce(threeItems, { tenantId: TENANT, key: threeKey, input: INPUT }),
  );
  return { replayRun, conflictRun, threeRun };
}

export async function preparePostgres(url: string): Promise<PgBench> {
  const admin = openPool(url, 2);
  await admin.query(ORDERS_DDL);
  const recorderPool = openPool(url, 2);
  const recorder = new StatementRecorder(new PostgresDialect({ pool: recorderPool }));
  const engine = createEngine({ db: recorder.db });
  await engine.migrate();

  const newKeyRun = await recorder.record(() =>
    engine.runOnce(orderOnce, { tenantId: TENANT, key: "seed-order", input: INPUT }),
  );
  await seedCopies(admin, {
    fromTenant: TENANT,
    fromKey: "seed-order",
    toTenant: "replay",
    prefix: "rk-",
    count: REPLAY_KEYS,
  });
  await seedCopies(admin, {
    fromTenant: TENANT,
    fromKey: "seed-order",
    toTenant: "busy",
    prefix: "bk-",
    count: BUSY_KEYS,
    set: HELD_IN_FLIGHT,
  });
  const { replayRun, conflictRun, threeRun } = await recordSeededPaths(recorder, engine, "seed-three");
  const writesRun = await recorder.record(() =>
    engine.runOnce(threeWrites, { tenantId: TENANT, key: "seed-writes", input: INPUT }),
  );
  await recorder.db.destroy();
  await checkWrites(admin, "seed-writes");

  const replicas: Replicas = {
    newKey: replicate("new key", newKeyRun, "seed-order"),
    replay: replicate("replay", replayRun, "rk-1"),
    conflict: replicate("conflict", conflictRun, "bk-1"),
    three: replicate("phase/step/phase", threeRun, "seed-three"),
  };
  await checkReplicas(admin, replicas);
  const shapes = newKeyShapes(replicas.newKey);
  await checkShapes(admin, shapes, TENANT);
  await admin.query("VACUUM ANALYZE");

  const pools = new Map<number, pg.Pool>();
  const engines = new Map<string, { engine: Engine; db: Kysely<unknown> }>();
  const pool = (size: number): pg.Pool => {
    let p = pools.get(size);
    if (!p) {
      p = openPool(url, size);
      pools.set(size, p);
    }
    return p;
  };
  return {
    url,
    admin,
    replicas,
    equalWorkStatements: writesRun.length,
    shapes,
    pool,
    engine(size, named = false) {
      const id = `${size}:${named}`;
      let e = engines.get(id);
      if (!e) {
        // Pools Kysely does not own: destroying Kysely must not end the shared pool.
        const shared = named ? withPreparedStatements(pool(size)) : pool(size);
        const db = new Kysely<unknown>({
          // The pool is shared between cells and ended by the bench, not by Kysely.
          dialect: new PostgresDialect({ pool: { connect: () => shared.connect(), end: async () => {} } }),
        });
        e = { engine: createEngine({ db }), db };
        engines.set(id, e);
      }
      return e.engine;
    },
    async close() {
      for (const e of engines.values()) await e.db.destroy();
      for (const p of pools.values()) await p.end();
      await admin.end();
    },
  };
}

/**
 * Run each write replica once and check its effect, so a replica whose
 * fenced writes silently matched nothing can never pass as "the limit".
 */
async function checkReplicas(admin: pg.Pool, replicas: Replicas): Promise<void> {
  for (const [replica, key] of [
    [replicas.newKey, "check-new"],
    [replicas.three, "check-three"],
  ] as const) {
    await sendReplica(admin, replica, key, true);
    const { rows } = await admin.query<{ status: string; recovery_point: string }>(
      "SELECT status, recovery_point FROM idempo.runs WHERE tenant_id = $1 AND key = $2",
      [TENANT, key],
    );
    if (rows[0]?.status !== "completed") {
      throw new Error(`replica '${replica.label}' left key ${key} ${rows[0]?.status ?? "absent"}, not completed`);
    }
  }
}

/** The equal-work workflow on `key` completed and wrote both of its order rows. */
async function checkWrites(admin: pg.Pool, key: string): Promise<void> {
  const { rows } = await admin.query<{ status: string | null; orders: number }>(
    `SELECT (SELECT status FROM idempo.runs WHERE tenant_id = $1 AND key = $2) AS status,
            (SELECT count(*)::int FROM orders WHERE id IN ($2, $3)) AS orders`,
    [TENANT, key, secondOrderId(key)],
  );
  if (rows[0]?.status !== "completed" || rows[0]?.orders !== 2) {
    throw new Error(`phase/step/phase with writes left ${JSON.stringify(rows[0])}, not completed with 2 orders`);
  }
}
