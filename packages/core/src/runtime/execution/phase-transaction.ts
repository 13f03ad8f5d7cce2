/**
 * A phase's transaction, begun on the phase's first statement. A phase whose
 * code never uses `tx` opens no transaction: its commit statement runs alone
 * in autocommit, as atomic as inside `BEGIN ... COMMIT` and two round trips
 * cheaper. A phase that uses `tx` gets `BEGIN` and its `SET LOCAL
 * lock_timeout` in one message where the driver takes two statements in one
 * query (node-postgres sends a query without parameters on the simple
 * protocol), and as two statements where it does not (a pool on the extended
 * protocol): the first refusal is remembered per database. PGlite refuses
 * them too, but it is one backend in this process: no other session exists
 * that could hold a lock, so no lock wait can happen there and a phase sends
 * `BEGIN` alone.
 */
import type { DatabaseConnection, Dialect, Driver, QueryResult } from "kysely";
import { CompiledQuery, Kysely, SingleConnectionProvider, Transaction } from "kysely";
import { isConnectionLoss, markSent, onConnection } from "../../store/connection-failures.js";
import type { Executor } from "../../store/run-store.js";
import { isSingleBackend } from "../../store/single-backend.js";

/** What the phase's body gets. */
export interface PhaseTransaction {
  /** The phase's transaction, as workflow code sees it; its first statement begins it. */
  // biome-ignore lint/suspicious/noExplicitAny: the store is schema-agnostic
  readonly tx: Transaction<any>;
  /** Where the phase's commit statement goes: the transaction once begun, else the same connection in autocommit. */
  committer(): Executor;
}

/**
 * How a phase begins on a database whose driver refused `BEGIN; SET LOCAL ...`
 * as one query (42601): `BEGIN`, then `SET LOCAL` as a query of its own
 * (`split`), or `BEGIN` alone on a database that is a single backend
 * (`alone`). Absent: the two go in one message.
 */
const beginOn = new WeakMap<object, "split" | "alone">();

/** PostgreSQL's answer to two commands in one extended-protocol query. */
const MULTIPLE_COMMANDS = "42601";

function unsupported(what: string): never {
  throw new Error(`${what} is not supported on a phase's transaction`);
}

/** The parts of Kysely's props a Transaction reaches only through methods it refuses anyway. */
const refusingDriver = new Proxy({} as Driver, { get: (_t, p) => () => unsupported(`driver.${String(p)}`) });
const refusingDialect = new Proxy({} as Dialect, { get: (_t, p) => () => unsupported(`dialect.${String(p)}`) });

/** The connection of a phase: the first query sends the BEGIN; after the end, queries are refused. */
class LazyBegin implements DatabaseConnection {
  begun = false;
  ended = false;
  #beginning: Promise<void> | undefined;

  constructor(
    private readonly connection: DatabaseConnection,
    private readonly db: object,
    private readonly lockTimeoutMs: number,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.ended) throw new Error("the phase's transaction is over: it has been committed or rolled back");
    this.#beginning ??= this.#begin();
    await this.#beginning;
    return this.connection.executeQuery<R>(query);
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    if (this.ended) throw new Error("the phase's transaction is over: it has been committed or rolled back");
    this.#beginning ??= this.#begin();
    await this.#beginning;
    yield* this.connection.streamQuery<R>(query, chunkSize);
  }

  async #begin(): Promise<void> {
    // A SET takes no snapshot, so the phase may still choose its isolation level after it.
    const setTimeout = `SET LOCAL lock_timeout = '${this.lockTimeoutMs}ms'`;
    this.begun = true; // from here on the end of the phase sends COMMIT or ROLLBACK
    let how = beginOn.get(this.db);
    if (how === undefined) {
      try {
        await this.connection.executeQuery(CompiledQuery.raw(`BEGIN; ${setTimeout}`));
        return;
      } catch (error) {
        if ((error as { code?: unknown }).code !== MULTIPLE_COMMANDS) throw error;
      }
      // The refused query began nothing: the connection is idle, outside a transaction.
      how = (await isSingleBackend(this.connection)) ? "alone" : "split";
      beginOn.set(this.db, how);
    }
    await this.connection.executeQuery(CompiledQuery.raw("BEGIN"));
    if (how === "split") await this.connection.executeQuery(CompiledQuery.raw(setTimeout));
  }

  /** COMMIT when the transaction began; nothing otherwise. A COMMIT whose answer never came may have landed. */
  async commit(): Promise<void> {
    this.ended = true;
    if (!this.begun) return;
    try {
      await this.connection.executeQuery(CompiledQuery.raw("COMMIT"));
    } catch (error) {
      markSent(error, "the COMMIT");
      throw error;
    }
  }

  /** ROLLBACK when the transaction began (a failed BEGIN included: ROLLBACK outside one only warns). */
  async rollback(): Promise<void> {
    this.ended = true;
    if (this.begun) await this.connection.executeQuery(CompiledQuery.raw("ROLLBACK"));
  }
}

/**
 * Run a phase's body on one connection of `db`, with a transaction that
 * begins on its first statement. When the body returns, the transaction (if
 * it began) commits; when it throws, it rolls back and the error is rethrown,
 * as Kysely's `db.transaction().execute` does.
 *
 * @param lockTimeoutMs an integer, the phase's `lock_timeout` in ms.
 */
export function inPhaseTransaction<T>(
  db: Executor,
  lockTimeoutMs: number,
  body: (phase: PhaseTransaction) => Promise<T>,
): Promise<T> {
  const executor = db.getExecutor();
  // A connection that could not be had is remembered as such: the phase ran nothing and may run again.
  return onConnection(executor, async (connection) => {
    const lazy = new LazyBegin(connection, db, lockTimeoutMs);
    const props = { config: { dialect: refusingDialect }, driver: refusingDriver, dialect: refusingDialect };
    const tx = new Transaction({
      ...props,
      executor: executor.withConnectionProvider(new SingleConnectionProvider(lazy)),
    });
    // Made only for a phase that never began its transaction: most phases write, and a Kysely per phase is not free.
    const autocommit = () =>
      new Kysely({ ...props, executor: executor.withConnectionProvider(new SingleConnectionProvider(connection)) });
    try {
      const result = await body({ tx, committer: () => (lazy.begun ? tx : autocommit()) });
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
  });
}
