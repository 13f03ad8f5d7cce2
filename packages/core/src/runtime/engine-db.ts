/**
 * The engine's side of the data-layer seam (`database/data-layer.ts`): the
 * data layer `createEngine`'s `db` stands for, the store's executors made
 * from it (autocommit, or one transaction), and the statistics a
 * single-backend database (PGlite) needs as the engine's tables grow.
 */
import type { DataLayer, SqlSession, TransactionOptions } from "../database/data-layer.js";
import { fromKysely, isKyselyDatabase } from "../database/kysely.js";
import { TableStatistics } from "../database/table-statistics.js";
import type { Executor, Tables } from "../store/run-store.js";

/** The data layer of an engine, whatever its transactions are. */
export type EngineLayer = DataLayer<unknown>;

/** True for what a `from...` function (or an application) made: an object with the three methods of the seam. */
function isDataLayer(value: unknown): value is EngineLayer {
  const layer = value as Partial<EngineLayer> | null;
  return (
    typeof layer?.query === "function" &&
    typeof layer.transaction === "function" &&
    typeof layer.sessionOf === "function"
  );
}

/** A data layer that fails each use: `createEngine` without `db` (a test file's engine made before its database). */
function missing(): never {
  throw new TypeError("createEngine needs `db`: a Kysely instance or a data layer (fromDrizzle, fromNodePostgres)");
}
const MISSING: EngineLayer = { query: async () => missing(), transaction: async () => missing(), sessionOf: missing };

/** The data layer of `createEngine`'s `db`: a data layer as it is, a Kysely instance through {@link fromKysely}. */
export function layerOf(db: unknown): EngineLayer {
  if (db === undefined) return MISSING;
  if (isDataLayer(db)) return db;
  if (isKyselyDatabase(db)) return fromKysely(db) as EngineLayer;
  return MISSING;
}

/**
 * The engine's statements outside any transaction. Before its first call of
 * a statement function it asks once whether the database is a single
 * backend; there `calls` counts the calls and has the tables analyzed as they grow.
 */
export function autocommitOn(layer: EngineLayer, tables: Tables): Executor {
  let asked = false;
  let asking: Promise<void> | undefined;
  const ask = async () => {
    try {
      if ((await layer.singleBackend?.()) === true) {
        const statistics = new TableStatistics(layer, tables.schema);
        tables.calls.observer = (inTransaction) => statistics.noteCall(inTransaction);
      }
      asked = true;
    } catch (error) {
      asking = undefined; // a database that was down is asked again next time
      throw error;
    }
  };
  return {
    isTransaction: false,
    async query<R>(text: string, values: readonly unknown[], name?: string) {
      if (name !== undefined && !asked) {
        asking ??= ask();
        await asking;
      }
      return layer.query<R>(text, values, name);
    },
  };
}

/** The store's executor on a transaction's session (the session itself when it says it is one). */
export function inSession(session: SqlSession): Executor {
  if ((session as Partial<Executor>).isTransaction === true) return session as Executor;
  return {
    isTransaction: true,
    query: (text, values, name, last) => session.query(text, values, name, last),
  };
}

/** Run `body` with the store's executor in a transaction of the engine's own (no application code in it). */
export function engineTransaction<T>(
  layer: EngineLayer,
  body: (tx: Executor) => Promise<T>,
  options?: TransactionOptions,
): Promise<T> {
  return layer.transaction((_tx, session) => body(inSession(session)), options);
}
