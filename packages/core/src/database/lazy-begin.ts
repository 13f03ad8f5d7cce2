/**
 * A Kysely connection whose transaction begins on its first statement. A
 * phase whose code never uses `tx` opens no transaction: its commit
 * statement runs alone in autocommit, as atomic as inside `BEGIN ... COMMIT`
 * and two round trips cheaper. A transaction with a lock timeout gets
 * `BEGIN` and its `SET LOCAL lock_timeout` in one message where the driver
 * takes two statements in one query (node-postgres sends a query without
 * parameters on the simple protocol), and as two statements where it does
 * not (a pool on the extended protocol): the first refusal is remembered per
 * database. PGlite refuses them too, but it is one backend in this process:
 * no other session exists that could hold a lock, so no lock wait can happen
 * there and it gets `BEGIN` alone.
 */
import { markSent } from "./connection-failures.js";
import type { KyselyConnection, KyselyModule, KyselyQueryResult } from "./kysely-types.js";
import { isSingleBackend } from "./single-backend.js";

/**
 * How a transaction begins on a database whose driver refused `BEGIN; SET
 * LOCAL ...` as one query (42601): `BEGIN`, then `SET LOCAL` as a query of
 * its own (`split`), or `BEGIN` alone on a database that is a single backend
 * (`alone`). Absent: the two go in one message.
 */
const beginOn = new WeakMap<object, "split" | "alone">();

/** PostgreSQL's answer to two commands in one extended-protocol query. */
const MULTIPLE_COMMANDS = "42601";

const OVER = "the phase's transaction is over: it has been committed or rolled back";

type CompiledQuery = Parameters<KyselyConnection["executeQuery"]>[0];

/** The connection of one transaction: the first query sends the BEGIN; after the end, queries are refused. */
export class LazyBegin implements KyselyConnection {
  begun = false;
  ended = false;
  #beginning: Promise<void> | undefined;

  /**
   * @param db the database the connection belongs to (where the way to begin is remembered).
   * @param lockTimeoutMs a whole number of ms, or undefined for none.
   */
  constructor(
    private readonly kysely: KyselyModule,
    readonly connection: KyselyConnection,
    private readonly db: object,
    private readonly lockTimeoutMs: number | undefined,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<KyselyQueryResult<R>> {
    if (this.ended) throw new Error(OVER);
    this.#beginning ??= this.#begin();
    await this.#beginning;
    return this.connection.executeQuery<R>(query);
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<KyselyQueryResult<R>> {
    if (this.ended) throw new Error(OVER);
    this.#beginning ??= this.#begin();
    await this.#beginning;
    yield* this.connection.streamQuery<R>(query, chunkSize);
  }

  #raw(text: string): Promise<unknown> {
    return this.connection.executeQuery(this.kysely.CompiledQuery.raw(text));
  }

  async #begin(): Promise<void> {
    this.begun = true; // from here on the end of the transaction sends COMMIT or ROLLBACK
    if (this.lockTimeoutMs === undefined) {
      await this.#raw("BEGIN");
      return;
    }
    // A SET takes no snapshot, so the phase may still choose its isolation level after it.
    const setTimeout = `SET LOCAL lock_timeout = '${Math.trunc(this.lockTimeoutMs)}ms'`;
    let how = beginOn.get(this.db);
    if (how === undefined) {
      try {
        await this.#raw(`BEGIN; ${setTimeout}`);
        return;
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== MULTIPLE_COMMANDS) throw error;
      }
      // The refused query began nothing: the connection is idle, outside a transaction.
      const single = await isSingleBackend(
        async (text) => (await this.connection.executeQuery(this.kysely.CompiledQuery.raw(text))).rows,
      );
      how = single ? "alone" : "split";
      beginOn.set(this.db, how);
    }
    await this.#raw("BEGIN");
    if (how === "split") await this.#raw(setTimeout);
  }

  /** COMMIT when the transaction began; nothing otherwise. A COMMIT whose answer never came may have landed. */
  async commit(): Promise<void> {
    this.ended = true;
    if (!this.begun) return;
    try {
      await this.#raw("COMMIT");
    } catch (error) {
      markSent(error, "the COMMIT");
      throw error;
    }
  }

  /** ROLLBACK when the transaction began (a failed BEGIN included: ROLLBACK outside one only warns). */
  async rollback(): Promise<void> {
    this.ended = true;
    if (this.begun) await this.#raw("ROLLBACK");
  }
}
