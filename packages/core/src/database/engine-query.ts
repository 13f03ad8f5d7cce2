/**
 * The engine's statements on node-postgres (under Kysely's
 * `PostgresDialect`, `fromNodePostgres`, and Drizzle on node-postgres):
 * each one a node-postgres `Query` of its own, which goes to a client's
 * `query` in place of the text or config (node-postgres runs a `Query` given
 * to it as it is, as it runs pg-cursor's; pg-pool's `pool.query` does not
 * call such a query back, so it goes only to a client). So the engine, not
 * the pool, says how its rows are read: with node-postgres' default parsers
 * (`pg.types`) whatever `types` the application gave its pool, and as text
 * even on a pool with `binary: true`. Its fixed statements carry the
 * engine's name, so node-postgres prepares each once per connection.
 *
 * Kysely's `log` callback sees such a query as `event.query.sql`, so it
 * reads like its text: it converts to it (template literals, `String()`,
 * `+`, JSON), prints as it (`console.log`, `util.inspect`), iterates as its
 * characters, and String's methods and `length` answer for it. It is still
 * an object: `typeof` says so, what insists on a primitive
 * (`Buffer.byteLength`, a hash's `update`) needs `String(sql)`, and it is
 * thenable (awaiting it gives its result, as `await client.query(...)`
 * does), so a log callback that awaits or resolves it needs `String(sql)`
 * too.
 */

/** What node-postgres calls a query back with: its error, or its result (with the fields Kysely's dialect reads). */
type Settle = (error: Error | null, result?: unknown) => void;

/** The parts of the `pg` module the engine's queries are built from. */
interface PgModule {
  /** node-postgres' `Query`, made from a config; it calls its `callback` when the server answered. */
  Query: new (
    config: object,
  ) => object;
  types: unknown;
}

/** Where a query keeps its callback: not an own enumerable field, so a copy of its fields carries none. */
const CALLBACK = Symbol("callback");

/** Makes one engine query: its text, values, and the engine's name for a fixed statement (or undefined). */
export type EngineQueries = (text: string, values: readonly unknown[], name: string | undefined) => object;

/** The engine's queries on the node-postgres whose module is `pg`. */
function engineQueries(pg: PgModule): EngineQueries {
  class EngineQuery extends pg.Query {
    readonly #done: Promise<unknown>;
    declare [CALLBACK]: Settle | undefined;

    constructor(config: { text: string; values: unknown[]; name?: string; types: unknown }) {
      super(config);
      // A callback rather than events: node-postgres calls a query's callback on every path (a read timeout
      // wraps it); it is kept off the query's own fields, since a wrapper of client.query that copies them
      // into a config of its own (to add options) must get a plain config that node-postgres answers as usual.
      this.#done = new Promise<unknown>((resolve, reject) => {
        const settle: Settle = (error, result) => (error ? reject(error) : resolve(result));
        Object.defineProperty(this, CALLBACK, { value: settle, writable: true });
      });
    }

    get callback(): Settle | undefined {
      return this[CALLBACK];
    }

    /** node-postgres' Query sets it from its config (undefined here: ignored); a read timeout wraps it. */
    set callback(callback: Settle | undefined) {
      if (callback !== undefined) this[CALLBACK] = callback;
    }

    /** Its rows (what `await client.query(...)` gives for a text), once the server answered. */
    // biome-ignore lint/suspicious/noThenProperty: the dialect awaits what client.query returns, which is this query
    then<A, B>(onDone?: (result: unknown) => A, onFailed?: (error: unknown) => B): Promise<A | B> {
      return this.#done.then(onDone, onFailed);
    }

    declare readonly text: string;

    get length(): number {
      return this.text.length;
    }

    override toString(): string {
      return this.text;
    }

    toJSON(): string {
      return this.text;
    }

    [Symbol.toPrimitive](): string {
      return this.text;
    }

    [Symbol.iterator](): Iterator<string> {
      return this.text[Symbol.iterator]();
    }

    /** What `console.log` and `util.inspect` print: the text, as for a string. */
    [Symbol.for("nodejs.util.inspect.custom")](): string {
      return this.text;
    }
  }
  // Rows as text, whatever the client's `binary`: node-postgres sets a query's `binary` from its client's.
  Object.defineProperty(EngineQuery.prototype, "binary", { get: () => false, set: () => undefined });
  for (const method of Object.getOwnPropertyNames(String.prototype)) {
    const fn = (String.prototype as unknown as Record<string, unknown>)[method];
    if (typeof fn !== "function" || method in EngineQuery.prototype) continue;
    Object.defineProperty(EngineQuery.prototype, method, {
      value(this: EngineQuery, ...args: unknown[]) {
        return (fn as (...a: unknown[]) => unknown).apply(this.text, args);
      },
    });
  }
  const types = pg.types;
  return (text, values, name) =>
    new EngineQuery(
      name === undefined ? { text, values: [...values], types } : { text, values: [...values], name, types },
    );
}

let loading: Promise<EngineQueries | undefined> | undefined;
/** What `pgEngineQueries` resolved to, once it has: read without a wait on every statement after the first. */
let loaded: { readonly queries: EngineQueries | undefined } | undefined;

/**
 * How the engine's queries are made with the `pg` this package resolves
 * (an optional peer: installed where the application has a node-postgres
 * pool), loaded on first use so nothing imports pg for an application
 * without it.
 *
 * @returns the maker of the engine's queries, or undefined where pg cannot be loaded from here (the statements
 *   then go as plain text or configs, read with the pool's parsers).
 */
export function pgEngineQueries(): Promise<EngineQueries | undefined> {
  loading ??= import("pg")
    .then(
      (pg) => engineQueries((pg as unknown as { default: PgModule }).default),
      () => undefined,
    )
    .then((queries) => {
      loaded = { queries };
      return queries;
    });
  return loading;
}

/** What {@link pgEngineQueries} resolved to, or undefined while it has not (so a caller waits only once). */
export function loadedEngineQueries(): { readonly queries: EngineQueries | undefined } | undefined {
  return loaded;
}
