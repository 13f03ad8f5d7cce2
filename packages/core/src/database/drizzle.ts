/**
 * The Drizzle data layer, for Drizzle's node-postgres and PGlite drivers. A
 * phase's `tx` is Drizzle's own transaction (`db.transaction(async (tx) =>
 * ...)`), typed with the application's schema; the engine's statements go
 * to the driver underneath it (`db.$client`, and in a transaction the
 * client Drizzle's session holds), not through Drizzle's query builder: so
 * its logger does not see them, and its type parsers (timestamps as
 * strings) do not change what the engine reads. Nothing here imports
 * Drizzle: the data layer uses the database object the application made.
 */
import { InvalidOptionError } from "../errors.js";
import { isConnectionLoss, markSent, markUnsent } from "./connection-failures.js";
import type { DataLayer, SqlSession, TransactionOptions } from "./data-layer.js";
import type { PgClient, PgPool, PgPoolClient } from "./node-postgres.js";
import { lockTimeoutStatement, poolQuery, sessionOn } from "./node-postgres.js";

/** The Drizzle transaction type of a Drizzle database `D`: what its `transaction` hands its callback. */
export type DrizzleTx<D> = D extends { transaction(fn: (tx: infer Tx) => Promise<unknown>, ...rest: never[]): unknown }
  ? Tx
  : never;

/** What the data layer needs of a Drizzle database made by `drizzle(...)` of `drizzle-orm/node-postgres` or `/pglite`. */
export interface DrizzleDatabase {
  /** The driver's client Drizzle was made with: a `pg.Pool` or a `PGlite`. */
  readonly $client: unknown;
  // biome-ignore lint/suspicious/noExplicitAny: any Drizzle transaction; DrizzleTx reads which one it is
  transaction(fn: (tx: any) => Promise<unknown>): Promise<unknown>;
}

/** PGlite's `query`, on the instance and on its transaction object. */
interface PgliteQueryable {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** A `PGlite` instance: one backend in this process. */
function isPglite(client: unknown): client is PgliteQueryable {
  const c = client as { exec?: unknown; transaction?: unknown; query?: unknown } | null;
  return typeof c?.exec === "function" && typeof c.transaction === "function" && typeof c.query === "function";
}

/** A `pg.Pool` (a `pg.Client` has no pool counters). */
function isPool(client: unknown): client is PgPool<PgPoolClient> {
  const c = client as { connect?: unknown; query?: unknown; totalCount?: unknown } | null;
  return typeof c?.connect === "function" && typeof c.query === "function" && typeof c.totalCount === "number";
}

/** The driver's client of a Drizzle transaction (or database): its session's `client`, as drizzle-orm 0.45 keeps it. */
function clientOf(tx: unknown): unknown {
  return (tx as { _?: { session?: { client?: unknown } } } | null)?._?.session?.client;
}

function isDrizzleTransaction(tx: unknown): boolean {
  return typeof (tx as { rollback?: unknown } | null)?.rollback === "function" && clientOf(tx) !== undefined;
}

/**
 * The driver's error under a Drizzle query error (`Failed query: ...`, the
 * driver's error as its `cause`) when that is a lost connection, so the
 * engine reports it as one (a `rollback` Drizzle sends on a broken
 * connection fails too, and is what Drizzle throws); else `error` itself.
 */
function driverFailure(error: unknown): unknown {
  const wrapped = error as { query?: unknown; params?: unknown; cause?: unknown } | null;
  const isQueryError = typeof wrapped?.query === "string" && "params" in wrapped;
  return isQueryError && isConnectionLoss(wrapped.cause) ? wrapped.cause : error;
}

function unexpectedShape(): never {
  throw new Error(
    "fromDrizzle: a Drizzle transaction without the driver's client in its session (tx._.session.client); " +
      "this release of idempo is tested with drizzle-orm 0.45",
  );
}

/** On PGlite: the statements of a transaction go to PGlite's transaction object. */
function pgliteSession(client: PgliteQueryable): SqlSession & { isTransaction: true } {
  return {
    isTransaction: true,
    query: async <R>(text: string, values: readonly unknown[]) =>
      (await client.query(text, values as unknown[])).rows as R[],
  };
}

class DrizzleLayer<Tx> implements DataLayer<Tx> {
  readonly #pglite: PgliteQueryable | undefined;
  readonly #pool: PgPool<PgPoolClient> | undefined;

  constructor(private readonly db: DrizzleDatabase) {
    const client = db.$client;
    if (isPglite(client)) this.#pglite = client;
    else if (isPool(client)) this.#pool = client;
    else {
      throw new InvalidOptionError(
        "db",
        "fromDrizzle: db must be a Drizzle database on a pg.Pool (drizzle-orm/node-postgres) or on PGlite " +
          "(drizzle-orm/pglite); a single pg.Client cannot hold a phase's transaction apart from the engine's statements",
      );
    }
  }

  async query<R>(text: string, values: readonly unknown[], name?: string): Promise<R[]> {
    if (this.#pool) return poolQuery<R>(this.#pool, text, values, name);
    return (await (this.#pglite as PgliteQueryable).query(text, values as unknown[])).rows as R[];
  }

  async transaction<T>(
    body: (tx: Tx, session: SqlSession) => Promise<T>,
    options: TransactionOptions = {},
  ): Promise<T> {
    // Drizzle sends BEGIN and COMMIT itself: what failed is told by how far the body got.
    let began = false;
    let done = false;
    try {
      return (await this.db.transaction((async (tx: Tx) => {
        began = true;
        const client = clientOf(tx) ?? unexpectedShape();
        // PGlite is one backend in this process: no other session can hold a lock, so no lock wait can happen.
        const session = this.#pglite ? pgliteSession(client as PgliteQueryable) : sessionOn(client as PgClient);
        if (!this.#pglite && options.lockTimeoutMs !== undefined) {
          await (client as PgClient).query(lockTimeoutStatement(options.lockTimeoutMs));
        }
        const result = await body(tx, session);
        done = true;
        return result;
      }) as (tx: unknown) => Promise<T>)) as T;
    } catch (error) {
      const failure = driverFailure(error);
      // No connection, or BEGIN refused: nothing ran. The body done: the COMMIT's answer never came.
      if (!began) markUnsent(failure);
      else if (done) markSent(failure, "the COMMIT");
      throw failure;
    }
  }

  sessionOf(tx: unknown): SqlSession | undefined {
    if (tx === this.db) return this;
    if (!isDrizzleTransaction(tx)) return undefined;
    const client = clientOf(tx);
    return this.#pglite ? pgliteSession(client as PgliteQueryable) : sessionOn(client as PgClient);
  }

  async singleBackend(): Promise<boolean> {
    return this.#pglite !== undefined;
  }
}

/**
 * The data layer of a Drizzle database on node-postgres (`drizzle(pool)` of
 * `drizzle-orm/node-postgres`, on a `pg.Pool`) or on PGlite (`drizzle(pglite)`
 * of `drizzle-orm/pglite`). A phase's `tx` is Drizzle's transaction, typed
 * with the application's schema: declare the workflow with
 * `workflow<TxOf<typeof data>>(name)` (or `workflow<WithTx<DrizzleTx<typeof
 * db>>>`). The engine's statements go to the driver under Drizzle (prepared
 * once per connection on node-postgres), and `engine.enqueue(tx, ...)` and
 * `engine.signal(..., { tx })` take a Drizzle transaction. No Kysely is needed.
 *
 * @example
 * ```ts
 * import { drizzle } from 'drizzle-orm/node-postgres'
 * import { integer, pgTable, text } from 'drizzle-orm/pg-core'
 * import pg from 'pg'
 * const orders = pgTable('orders', { id: text('id').primaryKey(), amountCents: integer('amount_cents').notNull() })
 * const db = drizzle(new pg.Pool({ connectionString: process.env.DATABASE_URL }), { schema: { orders } })
 * const data = fromDrizzle(db)
 * const engine = createEngine({ db: data })
 * const place = workflow<TxOf<typeof data>>('place')
 *   .phase('order', async ({ tx }) => {
 *     await tx.insert(orders).values({ id: 'o-1', amountCents: 1999 })
 *   })
 *   .respond(() => ({ status: 201, body: { orderId: 'o-1' } }))
 * ```
 * @param db the application's Drizzle database, on the database that holds idempo's tables.
 * @returns a data layer whose transactions are Drizzle transactions.
 * @throws InvalidOptionError when `db` is on neither a `pg.Pool` nor PGlite.
 */
export function fromDrizzle<D extends DrizzleDatabase>(db: D): DataLayer<DrizzleTx<D>> {
  return new DrizzleLayer<DrizzleTx<D>>(db);
}
