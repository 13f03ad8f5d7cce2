/**
 * The data layer of a node-postgres pool, and the statements on one of its
 * clients, which the Drizzle data layer on node-postgres shares. Each
 * engine statement goes to a client (never to `pool.query`) as a
 * node-postgres `Query` of the engine's own (`engine-query.ts`): its fixed
 * statements under the engine's name (node-postgres prepares each once per
 * connection), and every one read as text with node-postgres' default
 * parsers whatever the pool's `types` and `binary`. A phase's `tx` is the
 * transaction's `PoolClient`, which keeps the pool's parsers.
 */
import { markSent, markUnsent } from "./connection-failures.js";
import type { DataLayer, SqlSession, TransactionOptions } from "./data-layer.js";
import { loadedEngineQueries, pgEngineQueries } from "./engine-query.js";

/** A node-postgres query config: the text, its values, and a name to prepare it under. */
interface PgQueryConfig {
  text: string;
  values?: unknown[];
  name?: string;
}

/** What the engine's statements need of a node-postgres client or pool: `query` with a config. */
interface PgQueryable {
  query(config: PgQueryConfig): Promise<{ rows: unknown[] }>;
}

/** What the data layer needs of a node-postgres client: `query` with a config, or with a text alone. */
export interface PgClient extends PgQueryable {
  query(config: PgQueryConfig): Promise<{ rows: unknown[] }>;
  query(text: string): Promise<unknown>;
}

/** A client checked out of a pool, as node-postgres' `PoolClient`. */
export interface PgPoolClient extends PgClient {
  release(destroy?: Error | boolean): void;
  on?(event: "error", listener: (error: Error) => void): unknown;
  removeListener?(event: "error", listener: (error: Error) => void): unknown;
}

/** What the data layer needs of a node-postgres `Pool`. */
export interface PgPool<C extends PgPoolClient> extends PgQueryable {
  connect(): Promise<C>;
}

/**
 * Run one engine statement on a client (a pool's `query` would not call the
 * engine's `Query` back): a query of the engine's own, or where pg cannot be
 * loaded a query config (named for a fixed statement).
 */
async function queryOn<R>(
  client: PgClient,
  text: string,
  values: readonly unknown[],
  name: string | undefined,
): Promise<R[]> {
  const { queries } = loadedEngineQueries() ?? { queries: await pgEngineQueries() };
  const all = values as unknown[];
  const config =
    (queries?.(text, values, name) as PgQueryConfig | undefined) ??
    (name === undefined ? { text, values: all } : { text, values: all, name });
  return (await client.query(config)).rows as R[];
}

/**
 * Run one engine statement on its own on a client of `pool`, as `pool.query`
 * does (a client that failed a query is not put back), with a failed
 * checkout told apart: it sent nothing (`connection-failures.ts`).
 */
export async function poolQuery<R>(
  pool: PgPool<PgPoolClient>,
  text: string,
  values: readonly unknown[],
  name: string | undefined,
): Promise<R[]> {
  const client = await pool.connect().catch((error: unknown) => {
    markUnsent(error);
    throw error;
  });
  let failed: Error | undefined;
  try {
    return await queryOn<R>(client, text, values, name);
  } catch (error) {
    failed = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.release(failed);
  }
}

/** The session of a client inside a transaction (a pool's client, not the pool). */
export function sessionOn(client: PgClient): SqlSession & { isTransaction: true } {
  return {
    isTransaction: true,
    query: <R>(text: string, values: readonly unknown[], name?: string) => queryOn<R>(client, text, values, name),
  };
}

/** `SET LOCAL lock_timeout` as a statement (a whole number of ms). */
export function lockTimeoutStatement(ms: number): string {
  return `SET LOCAL lock_timeout = '${Math.trunc(ms)}ms'`;
}

/** node-postgres emits 'error' on a client whose backend dies between queries; unheard, that kills the process. */
const ignore = () => undefined;

/** True for a pool's client: the object a transaction of the application's own runs on. */
function isPoolClient(value: unknown): value is PgPoolClient {
  const client = value as Partial<PgPoolClient> | null;
  return typeof client?.query === "function" && typeof client.release === "function";
}

class NodePostgresLayer<C extends PgPoolClient> implements DataLayer<C> {
  constructor(private readonly pool: PgPool<C>) {}

  query<R>(text: string, values: readonly unknown[], name?: string): Promise<R[]> {
    return poolQuery<R>(this.pool, text, values, name);
  }

  async transaction<T>(body: (tx: C, session: SqlSession) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const client = await this.pool.connect().catch((error: unknown) => {
      markUnsent(error); // no connection: the body ran nothing and may run again
      throw error;
    });
    // A backend that dies while workflow code runs: the next query fails, and the process lives.
    client.on?.("error", ignore);
    let broken: Error | undefined;
    try {
      // Without parameters node-postgres sends the simple protocol: both statements go in one message.
      const lock = options.lockTimeoutMs;
      await client.query(lock === undefined ? "BEGIN" : `BEGIN; ${lockTimeoutStatement(lock)}`);
      const result = await body(client, sessionOn(client));
      await client.query("COMMIT").catch((error: unknown) => {
        markSent(error, "the COMMIT"); // its answer never came: it may have landed
        throw error;
      });
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((lost: unknown) => {
        broken = lost instanceof Error ? lost : new Error(String(lost)); // the pool destroys the client
      });
      throw error;
    } finally {
      client.removeListener?.("error", ignore);
      client.release(broken);
    }
  }

  sessionOf(tx: unknown): SqlSession | undefined {
    if (tx === this.pool) return this;
    return isPoolClient(tx) ? sessionOn(tx) : undefined;
  }
}

/**
 * The data layer of a node-postgres `Pool`: the engine's statements go to
 * the pool's clients directly (its fixed statements prepared once per
 * connection), and a phase's `tx` is the `PoolClient` its transaction runs
 * on, for the application's own `tx.query(...)`. `engine.enqueue(client, ...)`
 * and `engine.signal(..., { tx: client })` take a client inside the
 * application's own `BEGIN`. Its clients get a listener for the `'error'`
 * node-postgres emits when a backend dies while a phase's code runs, so the
 * process lives and the phase fails with `DatabaseUnavailableError`.
 *
 * @example
 * ```ts
 * import pg from 'pg'
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * const engine = createEngine({ db: fromNodePostgres(pool) })
 * const pay = workflow<WithTx<pg.PoolClient>>('pay')
 *   .phase('record', async ({ tx, input }) => {
 *     await tx.query('INSERT INTO payments (id) VALUES ($1)', [`pay-${JSON.stringify(input)}`])
 *   })
 *   .respond(() => ({ status: 201, body: { ok: true } }))
 * ```
 * @param pool a `pg.Pool` (a single `pg.Client` cannot hold a phase's transaction apart from the engine's other statements).
 * @returns a data layer whose transactions are the pool's clients.
 */
export function fromNodePostgres<C extends PgPoolClient>(pool: PgPool<C>): DataLayer<C> {
  return new NodePostgresLayer(pool);
}
