/**
 * A node-postgres pool wrapper with two jobs. It listens for the connection
 * errors node-postgres emits between queries, which would otherwise crash the
 * process. And it sends idempo's hot-path calls (their text starts with an
 * `idempo:` marker comment) as named statements; the engine now does that
 * itself on Kysely's `PostgresDialect` (the `preparedStatements` option of
 * `createEngine`), so here it matters only for calls that reach the pool as
 * plain text. The application's own queries pass through untouched.
 */
import { createHash } from "node:crypto";
import { PREPARED_STATEMENTS_OPTIONS } from "./options/known-options.js";
import { checkOptions } from "./options/option-shape.js";
import { LOST_STATEMENT } from "./store/statement-calls.js";

const MARKER = "/* idempo:";

/** The part of a node-postgres client the wrapper needs. */
interface QueryableClient {
  query(...args: unknown[]): unknown;
}

/** Where node-postgres reports a connection that died outside a query (a pool also announces new clients). */
interface ErrorEmitter {
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "connect", listener: (client: unknown) => void): unknown;
}

/** The part of a node-postgres pool Kysely's `PostgresDialect` uses. */
interface ConnectablePool<C extends QueryableClient> {
  connect(): Promise<C>;
  end(): Promise<void>;
}

/** Options of {@link withPreparedStatements}. */
export interface PreparedStatementsOptions {
  /**
   * Called with the `'error'` event of the pool or of one of its clients: a
   * backend terminated, a server restart, a dropped network, between two
   * queries. (Default: ignore it; the next query on that connection fails and
   * idempo raises `DatabaseUnavailableError`.) Use it to log.
   */
  readonly onConnectionError?: (error: Error) => void;
}

function canEmitErrors(value: unknown): value is ErrorEmitter {
  return typeof (value as Partial<ErrorEmitter> | null)?.on === "function";
}

/**
 * node-postgres emits `'error'` on a client whose backend dies while no query
 * runs on it (a phase's transaction waiting on workflow code), and on the
 * pool for idle clients. An `'error'` event nobody listens to kills the
 * process, so the engine would never get to report the loss. One listener
 * per client and one on the pool; the broken client is dropped by the pool
 * when it is released.
 */
function listenForConnectionErrors(pool: unknown, onError: (error: Error) => void): (client: unknown) => void {
  const listening = new WeakSet<object>();
  const guard = (client: unknown) => {
    if (!canEmitErrors(client) || listening.has(client)) return;
    listening.add(client);
    client.on("error", onError);
  };
  if (canEmitErrors(pool)) {
    pool.on("error", onError);
    pool.on("connect", guard);
  }
  return guard;
}

const names = new Map<string, string>();

function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `idempo_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/** Whether the clients of one wrapped pool still name idempo's statements. */
interface Naming {
  on: boolean;
}

function codeOf(error: unknown): string {
  return String((error as { code?: unknown } | null)?.code);
}

/**
 * Run a named call; when the server session does not hold the statement as
 * node-postgres believes (DISCARD ALL, DEALLOCATE, a transaction-mode
 * pooler), name nothing more on this pool and send the call again unnamed:
 * the refused message ran nothing. Inside a transaction the session already
 * aborted it (25P02), so the first error is the one reported.
 */
async function namedOrText(client: QueryableClient, text: string, values: unknown[], naming: Naming) {
  try {
    return await client.query({ name: statementName(text), text, values });
  } catch (error) {
    if (!LOST_STATEMENT.includes(codeOf(error))) throw error;
    naming.on = false;
    try {
      return await client.query(text, values);
    } catch (again) {
      throw codeOf(again) === "25P02" ? error : again;
    }
  }
}

/** A view of the client whose `query` names idempo's statements; the client itself is not changed. */
function naming<C extends QueryableClient>(client: C, state: Naming): C {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "query") return typeof value === "function" ? value.bind(target) : value;
      return (first: unknown, ...rest: unknown[]) => {
        if (!state.on || typeof first !== "string" || !first.startsWith(MARKER) || !Array.isArray(rest[0])) {
          return target.query(first, ...rest);
        }
        // A callback-style call (not Kysely's) is named as it is, without the fallback.
        if (rest.length > 1)
          return target.query({ name: statementName(first), text: first, values: rest[0] }, ...rest.slice(1));
        return namedOrText(target, first, rest[0], state);
      };
    },
  });
}

/**
 * Wrap a `pg.Pool` so a connection that dies between queries never crashes
 * the process, and idempo's hot-path calls that reach it as text (a marker
 * comment first) run as prepared (named) statements, once per connection.
 * Give the result to Kysely's `PostgresDialect`. The engine already prepares
 * its calls on a plain pool by default, so the listeners are what this adds.
 * A call refused because the session lost its statements (`DISCARD ALL`, a
 * transaction-mode pooler) is sent again unnamed, and the pool names nothing
 * from then on.
 *
 * It listens for `'error'` events on the pool and on every client it
 * hands out, so a lost connection (`pg_terminate_backend`, a server
 * restart, a dropped network) never crashes the process: the run in
 * progress raises `DatabaseUnavailableError` and a retry after its lease
 * resumes it. Those listeners are added to the pool itself, so they also
 * cover other users of the same pool; everything else about it is unchanged.
 *
 * @example
 * const pool = new pg.Pool({ connectionString })
 * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: withPreparedStatements(pool) }) })
 *
 * @param pool a node-postgres `Pool` (or anything with the same `connect`).
 * @param options `onConnectionError` to log lost connections (Default: ignored).
 * @returns a pool whose clients name idempo's statements.
 * @throws InvalidOptionError for an unknown option or one of the wrong type.
 */
export function withPreparedStatements<C extends QueryableClient, P extends ConnectablePool<C>>(
  pool: P,
  options: PreparedStatementsOptions = {},
): P {
  checkOptions("withPreparedStatements", PREPARED_STATEMENTS_OPTIONS, options);
  const guard = listenForConnectionErrors(pool, options.onConnectionError ?? (() => undefined));
  const state: Naming = { on: true };
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (property === "connect")
        return async () => {
          const client = await target.connect();
          guard(client);
          return naming(client, state);
        };
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
