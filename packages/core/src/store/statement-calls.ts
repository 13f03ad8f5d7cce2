/**
 * How the engine calls its statement functions (migrations 0008-0010): the hot
 * path's claim, takeover, commits and renewal. Each call's text is built once
 * per engine, not compiled by Kysely on every call, and on node-postgres it
 * goes as a prepared (named) statement: the server parses and plans the short
 * `SELECT fn($1, ...)` once per connection instead of once per call, as it
 * already does for the statement inside the function. The application's own
 * queries are never touched.
 *
 * node-postgres takes a query config `{ text, name }` in place of the text
 * and prepares a named statement once per connection (its documented
 * "prepared statements"); Kysely's `PostgresDialect` hands the compiled
 * query's `sql` to `client.query` unchanged, so the engine gives it such a
 * config. Other drivers (PGlite and the rest) get the plain text. Which one
 * the database is, is read once per engine from the class of the connection
 * its Kysely hands out; on PGlite, which runs no autovacuum, the calls are
 * also counted to have idempo's tables analyzed as they grow
 * (table-statistics.ts).
 */
import { createHash } from "node:crypto";
import type { Kysely, QueryResult } from "kysely";
import { CompiledQuery } from "kysely";
import { markSent, onConnection, retryRefused } from "./connection-failures.js";
import { isSingleBackend } from "./single-backend.js";
import { TableStatistics } from "./table-statistics.js";

/** What a call needs of a database or a transaction. */
// biome-ignore lint/suspicious/noExplicitAny: the store is schema-agnostic
type Executor = Pick<Kysely<any>, "getExecutor" | "isTransaction">;

/**
 * The statement functions, with the marker comment the call carries (logs,
 * `pg_stat_statements`), the arity of the form the engine calls (the
 * newest, where a migration added an overload) and whether it answers rows
 * or one boolean `ok`. test/statement-functions.test.ts checks each against
 * `pg_proc` of the migrated schema.
 */
export const FUNCTIONS = {
  claim_new_key: { marker: "claim", arity: 14, answer: "row" },
  take_over_expired_lease: { marker: "takeover", arity: 7, answer: "row" },
  commit_phase: { marker: "commit_phase", arity: 12, answer: "ok" },
  record_step_started: { marker: "step_started", arity: 8, answer: "row" },
  record_step_result: { marker: "step_result", arity: 12, answer: "ok" },
  record_branch_started: { marker: "branch_started", arity: 9, answer: "row" },
  record_branch_result: { marker: "branch_result", arity: 8, answer: "ok" },
  commit_parallel: { marker: "commit_parallel", arity: 12, answer: "ok" },
  complete_run: { marker: "complete", arity: 6, answer: "ok" },
  renew_lease: { marker: "renew", arity: 4, answer: "ok" },
  acquire_concurrency_slot: { marker: "slot", arity: 5, answer: "row" },
  renew_slot_lease: { marker: "renew_slot", arity: 5, answer: "ok" },
  take_rate_token: { marker: "rate_token", arity: 4, answer: "row" },
} as const;

/** A statement function of migration 0008 (the claim's as 0010 overloads it, the step result's as 0013 does, as 0014 restates some), of 0018 (slots, rate tokens) or of 0019 (parallel branches). */
export type StatementFunction = keyof typeof FUNCTIONS;

/**
 * A query config node-postgres prepares under `name` once per connection.
 * Kysely's `log` callback sees it as `event.query.sql`, where it expects the
 * text, so it reads like its text: it converts to it (template literals,
 * `String()`, `+`, JSON), prints as it (`console.log`, `util.inspect`),
 * iterates as its characters, and String's methods and `length` answer for
 * it. It is still an object: `typeof` says so, and what insists on a
 * primitive (`Buffer.byteLength`, a hash's `update`) needs `String(sql)`.
 */
class NamedStatement {
  constructor(
    readonly text: string,
    readonly name: string,
  ) {}

  get length(): number {
    return this.text.length;
  }

  toString(): string {
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
for (const method of Object.getOwnPropertyNames(String.prototype)) {
  const fn = (String.prototype as unknown as Record<string, unknown>)[method];
  if (typeof fn !== "function" || method in NamedStatement.prototype) continue;
  Object.defineProperty(NamedStatement.prototype, method, {
    value(this: NamedStatement, ...args: unknown[]) {
      return (fn as (...a: unknown[]) => unknown).apply(this.text, args);
    },
  });
}

/**
 * What the server answers to a named statement its session does not hold as
 * node-postgres believes: 26000 "prepared statement does not exist" (Bind),
 * 42P05 "prepared statement already exists" (Parse).
 */
export const LOST_STATEMENT: readonly string[] = ["26000", "42P05"];

/**
 * Run a call without the Kysely's plugins: their `transformResult` is for the
 * application's rows (CamelCasePlugin would rename `response_status`, and a
 * replay would answer 500), not for the columns the engine reads.
 */
async function run<R>(db: Executor, sql: string, args: readonly unknown[], fn: StatementFunction): Promise<R[]> {
  let executor = db.getExecutor();
  if (executor.plugins.length > 0) executor = executor.withoutPlugins();
  const query = CompiledQuery.raw(sql, args as unknown[]);
  // A connect that failed sent nothing; a call sent alone whose connection broke may have committed.
  const result: QueryResult<R> = await onConnection(executor, (connection) =>
    connection.executeQuery<R>(query).catch((error: unknown) => {
      if (!db.isTransaction) markSent(error, `the call of ${fn}`);
      throw error;
    }),
  );
  return result.rows;
}

/** The class of the connection Kysely's `PostgresDialect` hands out over a node-postgres pool. */
const NODE_POSTGRES_CONNECTION = "PostgresConnection";

interface CallText {
  readonly text: string;
  readonly named: NamedStatement;
}

/**
 * The calls of one engine's statement functions, in its schema.
 *
 * @param schema a plain SQL identifier (checked by `createEngine`).
 * @param prepare false to send every call unnamed, as text (for a pooler
 *   that cannot keep prepared statements, such as PgBouncer before 1.21 in
 *   transaction mode).
 */
export class StatementCalls {
  readonly #texts = new Map<StatementFunction, CallText>();
  /** undefined until read from a connection; then whether calls go as named statements. */
  #named: boolean | undefined;
  #reading: Promise<void> | undefined;
  /** Set when the database is PGlite, which runs no autovacuum. */
  #statistics: TableStatistics | undefined;

  constructor(
    private readonly schema: string,
    private readonly prepare: boolean,
    private readonly refusedRetryMs = 0,
  ) {}

  /**
   * Call `fn` with `args` (in the function's parameter order) on `db`, a
   * database or a transaction, and return the rows it answers. The first call
   * on a database (not a transaction) reads which driver it is. Outside a
   * transaction, a call the database refused without running it is sent
   * again for up to `refusedRetryMs` (during a failover: a standby that is
   * not promoted yet, a primary that is not up yet).
   */
  call<R>(db: Executor, fn: StatementFunction, args: readonly unknown[]): Promise<R[]> {
    if (db.isTransaction || this.refusedRetryMs === 0) return this.#call(db, fn, args);
    return retryRefused(this.refusedRetryMs, () => this.#call<R>(db, fn, args));
  }

  async #call<R>(db: Executor, fn: StatementFunction, args: readonly unknown[]): Promise<R[]> {
    const text = this.#texts.get(fn) ?? this.#build(fn);
    if (this.#named === undefined && !db.isTransaction) await this.#readDriver(db);
    if (!this.#named) {
      const rows = await run<R>(db, text.text, args, fn);
      if (this.#statistics) await this.#statistics.noteCall(db);
      return rows;
    }
    try {
      return await run<R>(db, text.named as unknown as string, args, fn);
    } catch (error) {
      if (!LOST_STATEMENT.includes(String((error as { code?: unknown }).code))) throw error;
      // The server session does not keep what node-postgres believes it prepared there: something between
      // them resets or shares sessions (DISCARD ALL, DEALLOCATE, a transaction-mode pooler). Plain text is
      // right on any session, so this engine sends text from now on. The failed message ran nothing (the
      // server refused its Parse or Bind), so outside a transaction the call is simply sent again.
      this.#named = false;
      if (db.isTransaction) throw error;
      return run<R>(db, text.text, args, fn);
    }
  }

  #build(fn: StatementFunction): CallText {
    const { marker, arity, answer } = FUNCTIONS[fn];
    const params = Array.from({ length: arity }, (_, i) => `$${i + 1}`).join(", ");
    const target = `"${this.schema}"."${fn}"(${params})`;
    const text = `/* idempo:${marker} */ SELECT ${answer === "row" ? `* FROM ${target}` : `${target} AS ok`}`;
    // A name within PostgreSQL's 63 bytes that changes with the text, so two texts never share one.
    const name = `idempo_${createHash("sha1").update(text).digest("hex").slice(0, 24)}`;
    const built = { text, named: new NamedStatement(text, name) };
    this.#texts.set(fn, built);
    return built;
  }

  #readDriver(db: Executor): Promise<void> {
    this.#reading ??= onConnection(db.getExecutor(), async (connection) => {
      const nodePostgres = connection.constructor.name === NODE_POSTGRES_CONNECTION;
      if (!nodePostgres && (await isSingleBackend(connection))) this.#statistics = new TableStatistics(this.schema);
      this.#named = this.prepare && nodePostgres;
    }).catch((error: unknown) => {
      this.#reading = undefined; // a database that was down is asked again next time
      throw error;
    });
    return this.#reading;
  }
}
