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

const names = new Map<string, string>();

function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `idempo_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/** A view of the client whose `query` names idempo's statements; the client itself is not changed. */
function naming<C extends QueryableClient>(client: C): C {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "query") return typeof value === "function" ? value.bind(target) : value;
      return (first: unknown, ...rest: unknown[]) =>
        typeof first === "string" && first.startsWith(MARKER) && Array.isArray(rest[0])
          ? target.query({ name: statementName(first), text: first, values: rest[0] }, ...rest.slice(1))
          : target.query(first, ...rest);
    },
  });
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
      if (property === "connect") return async () => naming(await target.connect());
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
