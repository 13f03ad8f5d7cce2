/**
 * Prepared statements for idempo's hot path on node-postgres. Kysely sends
 * every query unnamed, so PostgreSQL parses and plans the claim and commit
 * statements on every call; on a small server that is a third or more of
 * their cost. This wrapper turns only idempo's fixed statements (their text
 * starts with an `idempo:` marker comment) into named statements, once per
 * connection; the application's own queries pass through untouched.
 */
import { createHash } from "node:crypto";

const MARKER = "/* idempo:";

/** The part of a node-postgres client the wrapper needs. */
interface QueryableClient {
  query(...args: unknown[]): unknown;
}

/** The part of a node-postgres pool Kysely's `PostgresDialect` uses. */
interface ConnectablePool<C extends QueryableClient> {
  connect(): Promise<C>;
  end(): Promise<void>;
}

const patched = new WeakSet<object>();
const names = new Map<string, string>();

function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `idempo_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

function patch<C extends QueryableClient>(client: C): C {
  if (patched.has(client)) return client;
  const query = client.query.bind(client);
  client.query = (first: unknown, ...rest: unknown[]) => {
    if (typeof first === "string" && first.startsWith(MARKER) && Array.isArray(rest[0])) {
      return query({ name: statementName(first), text: first, values: rest[0] }, ...rest.slice(1));
    }
    return query(first, ...rest);
  };
  patched.add(client);
  return client;
}

/**
 * Wrap a `pg.Pool` so idempo's claim, takeover, commit and renewal
 * statements run as prepared (named) statements. Give the result to
 * Kysely's `PostgresDialect`; everything else about the pool is unchanged.
 * Each distinct statement is prepared once per connection (about ten).
 *
 * @example
 * const pool = new pg.Pool({ connectionString })
 * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: withPreparedStatements(pool) }) })
 *
 * @param pool a node-postgres `Pool` (or anything with the same `connect`).
 * @returns a pool whose clients name idempo's statements.
 */
export function withPreparedStatements<C extends QueryableClient, P extends ConnectablePool<C>>(pool: P): P {
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (property === "connect") return async () => patch(await target.connect());
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
