/**
 * The seam between the engine and the application's data layer: what the
 * engine needs of Kysely, Drizzle, node-postgres (or Knex, Prisma, ...) to
 * run its own statements and to give a phase a transaction the application
 * writes with. Three methods; `fromKysely`, `fromDrizzle` and
 * `fromNodePostgres` implement it, and an application may implement it for
 * another library. The idea of one narrow SQL seam with a small adapter per
 * library is pg-boss's (`IDatabase` and its `executeSql`); this one also
 * opens transactions, because a phase's writes and its recovery point must
 * commit in the same one.
 */

import type { KyselyTransaction } from "./kysely-types.js";

/** The type that marks a phase's `tx`: `workflow<WithTx<PoolClient>>('checkout')`; see {@link TxOf}. */
export interface WithTx<Tx> {
  /** Never set: the type parameter is all there is. */
  readonly " idempo phase tx": Tx;
}

/**
 * The marker of the type a data layer gives a phase's `tx`, for
 * `workflow<TxOf<typeof data>>(name)`: with `const data = fromDrizzle(db)`,
 * phases get Drizzle's transaction typed with the application's schema.
 */
export type TxOf<Layer> = Layer extends DataLayer<infer Tx> ? WithTx<Tx> : never;

/**
 * The type of a phase's `tx` in a `workflow<DB>`: `Tx` for `DB =
 * WithTx<Tx>`, else a Kysely `Transaction<DB>` (`DB` is the Kysely database
 * type, as before data layers).
 */
export type PhaseTx<DB> = [DB] extends [WithTx<infer Tx>] ? Tx : KyselyTransaction<DB>;

/** Where the engine's statements run: the data layer itself (autocommit) or one transaction. */
export interface SqlSession {
  /**
   * Run one statement and return its rows, with the statement's column
   * names as they are (no renaming plugin) and values as the driver parses
   * them by default (node-postgres: `timestamptz` as `Date`, `json` parsed,
   * `bigint` as string; the engine casts what it reads).
   *
   * @param text one statement, with placeholders `$1` to `$n`.
   * @param values the values of the placeholders, in order (strings,
   *   numbers, booleans, null, `Date`, arrays of strings).
   * @param name given only for the engine's fixed hot-path statements, always
   *   the same name for the same text: a driver that prepares statements may
   *   prepare it under that name once per connection (node-postgres' `name`
   *   in a query config). Ignore it otherwise. A driver that uses it must
   *   fail the query with the server's SQLSTATE (`code` 26000 or 42P05) when
   *   the session no longer holds what it prepared; the engine then sends
   *   its statements unnamed.
   * @param last set on the last statement the engine sends in a transaction
   *   opened with `deferBegin`: when nothing began yet, the data layer may run
   *   it alone in autocommit (one statement is atomic) and commit nothing.
   *   Ignore it otherwise.
   */
  query<R = Record<string, unknown>>(
    text: string,
    values: readonly unknown[],
    name?: string,
    last?: boolean,
  ): Promise<R[]>;
}

/** How the engine wants a transaction opened. */
export interface TransactionOptions {
  /**
   * `lock_timeout` for the transaction, a whole number of ms: set it (`SET
   * LOCAL lock_timeout = '<n>ms'`) before the first statement of the body.
   * Absent: leave the session's setting. A phase sets it so that a row lock
   * held by a stalled attempt cannot hold the phase for ever.
   */
  readonly lockTimeoutMs?: number;
  /**
   * The engine allows the data layer to send `BEGIN` (and the lock timeout)
   * only before the first statement of `tx` or of the session, so that a
   * phase whose code never writes opens no transaction; see `last`. A data
   * layer may as well begin at once.
   */
  readonly deferBegin?: boolean;
}

/**
 * What the engine needs of the application's data layer. idempo's tables
 * live in the same database as the application's, so a phase's writes and
 * the engine's record of them commit in one transaction. Its `query` runs
 * one statement on its own, in autocommit, on any connection of the pool:
 * the engine's claims, renewals, commits outside a phase, reads.
 *
 * @example
 * ```ts
 * // A data layer for another library: its raw query call, its transaction
 * // with the library's own transaction object, and the raw call on that object.
 * declare const lib: {
 *   raw(text: string, values: readonly unknown[]): Promise<{ rows: Record<string, unknown>[] }>
 *   transaction<T>(fn: (trx: { raw: typeof lib.raw }) => Promise<T>): Promise<T>
 * }
 * type LibTx = { raw: typeof lib.raw }
 * const data: DataLayer<LibTx> = {
 *   query: async (text, values) => (await lib.raw(text, values)).rows as never,
 *   transaction: (body) => lib.transaction((trx) => body(trx, { query: async (text, values) => (await trx.raw(text, values)).rows as never })),
 *   sessionOf: (tx) => {
 *     const trx = tx as Partial<LibTx> | null
 *     return typeof trx?.raw === 'function' ? { query: async (text, values) => (await trx.raw!(text, values)).rows as never } : undefined
 *   },
 * }
 * ```
 */
export interface DataLayer<Tx = unknown> extends SqlSession {
  /**
   * Run `body` in a new transaction on one connection, and commit when it
   * resolves; when it throws, roll back and rethrow its error. `tx` is the
   * data layer's own transaction object, bound to that connection (what a
   * phase's `ctx.tx` is); `session` runs the engine's statements in the
   * same transaction. Nothing else may run on that connection meanwhile.
   */
  transaction<T>(body: (tx: Tx, session: SqlSession) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * The session of a transaction the application opened itself (the `tx`
   * of `engine.enqueue(tx, ...)` and `engine.signal(..., { tx })`), or of
   * the data layer's own database object for a statement on its own;
   * `undefined` when `tx` is neither.
   */
  sessionOf(tx: unknown): SqlSession | undefined;
  /**
   * Optional: true when the database is one backend in this process
   * (PGlite): no other session can hold a lock, and no autovacuum keeps the
   * tables' statistics, so the engine analyzes its tables as they grow.
   * Asked once per engine, before its first statement (Default: false).
   */
  singleBackend?(): Promise<boolean>;
}
