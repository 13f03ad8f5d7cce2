/**
 * The Kysely data layer: the application's `Kysely` instance (any dialect:
 * node-postgres, PGlite, ...), which `createEngine({ db })` takes as it is.
 * The engine's statements go straight to the connection Kysely's driver
 * hands out, without Kysely's executor and without the application's
 * plugins (their `transformResult` is for the application's rows:
 * CamelCasePlugin would rename `response_status`, and a replay would answer
 * 500); Kysely's `log` wraps that connection, so it still sees each of them.
 * A phase's `tx` is a Kysely `Transaction` with the plugins, on the
 * connection the engine's statements of that phase use; its transaction
 * begins on its first statement (`lazy-begin.ts`). On node-postgres the
 * engine's statements go as queries of its own (`engine-query.ts`): its
 * fixed ones prepared, and every one read as text with node-postgres'
 * default parsers whatever the pool's `types` and `binary`. Kysely's classes
 * (and on node-postgres, pg's `Query`) are loaded when the data layer is
 * first used, so nothing imports Kysely for an application that uses
 * another.
 */
import { isConnectionLoss, markAlone, markUnsent } from "./connection-failures.js";
import type { DataLayer, SqlSession, TransactionOptions } from "./data-layer.js";
import type { EngineQueries } from "./engine-query.js";
import { pgEngineQueries } from "./engine-query.js";
import type {
  KyselyConnection,
  KyselyDatabase,
  KyselyModule,
  KyselyQueryResult,
  KyselyTransaction,
} from "./kysely-types.js";
import { LazyBegin } from "./lazy-begin.js";
import { isSingleBackend } from "./single-backend.js";

// biome-ignore lint/suspicious/noExplicitAny: the engine's statements are schema-agnostic
type AnyKysely = KyselyDatabase<any>;
type Executor = ReturnType<AnyKysely["getExecutor"]>;

/** The class of the connection Kysely's `PostgresDialect` hands out over a node-postgres pool. */
const NODE_POSTGRES_CONNECTION = "PostgresConnection";

let loading: Promise<KyselyModule> | undefined;

function unsupported(what: string): never {
  throw new Error(`${what} is not supported on a phase's transaction`);
}

/** The parts of Kysely's props a Transaction reaches only through methods it refuses anyway. */
const refusing = (what: string) => new Proxy({}, { get: (_t, p) => () => unsupported(`${what}.${String(p)}`) });
const refusingProps = {
  config: { dialect: refusing("dialect") },
  driver: refusing("driver"),
  dialect: refusing("dialect"),
};

/** A Kysely instance or transaction, as `sessionOf` recognises one. */
function isKysely(value: unknown): value is AnyKysely {
  const candidate = value as Partial<AnyKysely> | null;
  return typeof candidate?.getExecutor === "function" && typeof candidate.withoutPlugins === "function";
}

class KyselyLayer implements DataLayer<KyselyTransaction<unknown>> {
  readonly #app: AnyKysely;
  readonly #engine: Executor;
  #kysely: KyselyModule | undefined;
  /** Whether connections are node-postgres' (the engine's queries go); undefined until one was seen. */
  #nodePostgres: boolean | undefined;
  #probing: Promise<boolean> | undefined;
  /** On node-postgres: how the engine's queries are made (`pgEngineQueries`; undefined where pg cannot be loaded). */
  #queries: EngineQueries | undefined;

  constructor(db: AnyKysely) {
    this.#app = db;
    this.#engine = db.withoutPlugins().getExecutor();
  }

  async #module(): Promise<KyselyModule> {
    loading ??= import("kysely");
    this.#kysely = await loading;
    return this.#kysely;
  }

  /** Learns from a connection whether the driver is node-postgres, and there loads how its queries are made. */
  async #detect(connection: KyselyConnection): Promise<boolean> {
    const nodePostgres = connection.constructor.name === NODE_POSTGRES_CONNECTION;
    if (nodePostgres) this.#queries ??= await pgEngineQueries();
    this.#nodePostgres ??= nodePostgres;
    return nodePostgres;
  }

  /** What goes to the connection: the text, or on node-postgres a query of the engine's own. */
  #compile(kysely: KyselyModule, text: string, values: readonly unknown[], name: string | undefined) {
    const sql = this.#queries === undefined ? text : (this.#queries(text, values, name) as unknown as string);
    return kysely.CompiledQuery.raw(sql, values as unknown[]);
  }

  /** One statement on a connection this layer holds (a transaction's, or one alone). */
  async #on<R>(connection: KyselyConnection, text: string, values: readonly unknown[], name?: string): Promise<R[]> {
    const kysely = this.#kysely ?? (await this.#module());
    const result: KyselyQueryResult<R> = await connection.executeQuery<R>(this.#compile(kysely, text, values, name));
    return result.rows;
  }

  async query<R>(text: string, values: readonly unknown[], name?: string): Promise<R[]> {
    // Which driver this is, is read from a connection once, before the first statement on its own.
    if (this.#nodePostgres === undefined) await this.singleBackend();
    const kysely = this.#kysely ?? (await this.#module());
    const query = this.#compile(kysely, text, values, name);
    // A connect that failed sent nothing (what Kysely's executeQuery does, with that told apart).
    let connected = false;
    try {
      const result = await this.#engine.provideConnection((connection: KyselyConnection) => {
        connected = true;
        return connection.executeQuery<R>(query);
      });
      return result.rows;
    } catch (error) {
      if (!connected) markUnsent(error);
      throw error;
    }
  }

  /** Reads, from a connection, which driver this is (and on another than node-postgres, whether it is PGlite). */
  singleBackend(): Promise<boolean> {
    this.#probing ??= this.#engine
      .provideConnection(async (connection: KyselyConnection) => {
        if (await this.#detect(connection)) return false;
        const kysely = this.#kysely ?? (await this.#module());
        return isSingleBackend(async (text) => (await connection.executeQuery(kysely.CompiledQuery.raw(text))).rows);
      })
      .catch((error: unknown) => {
        this.#probing = undefined; // a database that was down is asked again next time
        throw error;
      });
    return this.#probing;
  }

  async transaction<T>(
    body: (tx: KyselyTransaction<unknown>, session: SqlSession) => Promise<T>,
    options: TransactionOptions = {},
  ): Promise<T> {
    const kysely = this.#kysely ?? (await this.#module());
    const executor = this.#app.getExecutor();
    // A connection that could not be had is remembered as such: the body ran nothing and may run again.
    let connected = false;
    return executor
      .provideConnection(async (connection: KyselyConnection) => {
        connected = true;
        if (this.#nodePostgres === undefined) await this.#detect(connection);
        const lazy = new LazyBegin(kysely, connection, this.#app, options.lockTimeoutMs);
        const tx = new kysely.Transaction({
          ...refusingProps,
          executor: executor.withConnectionProvider(new kysely.SingleConnectionProvider(lazy)),
        } as never) as KyselyTransaction<unknown>;
        const deferred = options.deferBegin === true;
        const session: SqlSession & { isTransaction: true } = {
          isTransaction: true,
          query: <R>(text: string, values: readonly unknown[], name?: string, last?: boolean) => {
            if (deferred && last === true && !lazy.begun) {
              // Nothing began: the last statement runs alone, in autocommit, on the same connection.
              return this.#on<R>(connection, text, values, name).catch((error: unknown) => {
                markAlone(error);
                throw error;
              });
            }
            return this.#on<R>(lazy, text, values, name);
          },
        };
        try {
          const result = await body(tx, session);
          await lazy.commit();
          return result;
        } catch (error) {
          // On a connection that broke, ROLLBACK fails too (the server rolls back a lost session by itself):
          // the error that broke it, with what it knows of the COMMIT, is the one to report.
          await lazy.rollback().catch((rollbackError: unknown) => {
            throw isConnectionLoss(error) ? error : rollbackError;
          });
          throw error;
        }
      })
      .catch((error: unknown) => {
        if (!connected) markUnsent(error);
        throw error;
      });
  }

  sessionOf(tx: unknown): SqlSession | undefined {
    if (!isKysely(tx)) return undefined;
    const executor = tx.withoutPlugins().getExecutor();
    return {
      query: <R>(text: string, values: readonly unknown[], name?: string) =>
        executor.provideConnection((connection: KyselyConnection) => this.#on<R>(connection, text, values, name)),
    };
  }
}

/**
 * The data layer of a Kysely instance: what `createEngine({ db })` makes of
 * a `Kysely` given as `db`, and what phases of a `workflow<DB>` get as their
 * `tx` (a Kysely `Transaction<DB>`). Any dialect works; on Kysely's
 * `PostgresDialect` the engine's hot-path statements go as prepared
 * statements (see `createEngine`'s `preparedStatements`). The engine's
 * statements go straight to the connection Kysely's driver hands out
 * (without its executor or the instance's plugins) and are seen by its
 * `log`; on node-postgres they are read as text with node-postgres' default
 * parsers (`pg.types`), so a pool's own `types` and `binary` change only
 * what the application's queries read.
 *
 * @example
 * ```ts
 * const engine = createEngine({ db: fromKysely(db) }) // the same as createEngine({ db })
 * ```
 * @param db the application's `Kysely` instance, on the database that holds idempo's tables.
 * @returns a data layer whose transactions are Kysely transactions.
 */
export function fromKysely<DB>(db: KyselyDatabase<DB>): DataLayer<KyselyTransaction<DB>> {
  return new KyselyLayer(db as AnyKysely) as unknown as DataLayer<KyselyTransaction<DB>>;
}

/** True for a `Kysely` instance (what `createEngine({ db })` wraps with {@link fromKysely}). */
export function isKyselyDatabase(value: unknown): value is AnyKysely {
  return isKysely(value) && typeof (value as { selectFrom?: unknown }).selectFrom === "function";
}
