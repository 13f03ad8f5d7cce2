/**
 * How the engine calls its statement functions (migrations 0008-0010): the hot
 * path's claim, takeover, commits and renewal. Each call's text is built once
 * per engine, and goes to the data layer with a name: a driver that prepares
 * statements (node-postgres) parses and plans the short `SELECT fn($1, ...)`
 * once per connection instead of once per call, as the server already does
 * for the statement inside the function; other drivers ignore the name. The
 * application's own queries are never touched.
 */
import { createHash } from "node:crypto";
import { markSent, ranAlone, retryRefused } from "../database/connection-failures.js";
import type { Executor } from "./executor.js";

/**
 * The statement functions of a run's own progress: the claim and the
 * takeover that make an attempt its owner, and what the owner then calls
 * (the commits of phases, steps and parallel branches, the completion, the
 * renewal of its lease).
 */
const RUN_FUNCTIONS = {
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
} as const;

/**
 * The statement functions of the limits (migration 0018), shared by the
 * runs of one key or of one rate-limited step: a concurrency slot's take
 * and its renewal, a rate token.
 */
const LIMIT_FUNCTIONS = {
  acquire_concurrency_slot: { marker: "slot", arity: 5, answer: "row" },
  renew_slot_lease: { marker: "renew_slot", arity: 5, answer: "ok" },
  take_rate_token: { marker: "rate_token", arity: 4, answer: "row" },
} as const;

/**
 * The statement functions, with the marker comment the call carries (logs,
 * `pg_stat_statements`), the arity of the form the engine calls (the
 * newest, where a migration added an overload) and whether it answers rows
 * or one boolean `ok`. test/statement-functions.test.ts checks each against
 * `pg_proc` of the migrated schema.
 */
export const FUNCTIONS = { ...RUN_FUNCTIONS, ...LIMIT_FUNCTIONS } as const;

/** A statement function of migration 0008 (the claim's as 0010 overloads it, the step result's as 0013 does, as 0014 restates some), of 0018 (slots, rate tokens) or of 0019 (parallel branches). */
export type StatementFunction = keyof typeof FUNCTIONS;

/**
 * What the server answers to a named statement its session does not hold as
 * node-postgres believes: 26000 "prepared statement does not exist" (Bind),
 * 42P05 "prepared statement already exists" (Parse).
 */
export const LOST_STATEMENT: readonly string[] = ["26000", "42P05"];

interface CallText {
  readonly text: string;
  readonly name: string;
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
  /** Whether calls still go with their names: off for good once a session lost them. */
  #named: boolean;
  /** Told of every call once it answered (the table statistics of a single-backend database). */
  observer: ((inTransaction: boolean) => Promise<void>) | undefined;

  constructor(
    private readonly schema: string,
    prepare: boolean,
    private readonly refusedRetryMs = 0,
  ) {
    this.#named = prepare;
  }

  /**
   * Call `fn` with `args` (in the function's parameter order) on `db`, the
   * data layer or a transaction, and return the rows it answers. `last`
   * marks the last statement of a transaction (see `SqlSession.query`).
   * Outside a transaction, a call the database refused without running it
   * is sent again for up to `refusedRetryMs` (during a failover: a standby
   * that is not promoted yet, a primary that is not up yet).
   */
  async call<R>(db: Executor, fn: StatementFunction, args: readonly unknown[], last?: boolean): Promise<R[]> {
    const text = this.#texts.get(fn) ?? this.#build(fn);
    const rows =
      db.isTransaction || this.refusedRetryMs === 0
        ? await this.#send<R>(db, fn, text, args, last)
        : await retryRefused(this.refusedRetryMs, () => this.#send<R>(db, fn, text, args, last));
    if (this.observer) await this.observer(db.isTransaction);
    return rows;
  }

  /** One call; a call sent alone (autocommit) whose answer never came is remembered as maybe committed. */
  async #send<R>(
    db: Executor,
    fn: StatementFunction,
    text: CallText,
    args: readonly unknown[],
    last: boolean | undefined,
  ): Promise<R[]> {
    try {
      if (!this.#named) return await db.query<R>(text.text, args, undefined, last);
      try {
        return await db.query<R>(text.text, args, text.name, last);
      } catch (error) {
        if (!LOST_STATEMENT.includes(String((error as { code?: unknown } | null)?.code))) throw error;
        // The server session does not keep what the driver believes it prepared there: something between
        // them resets or shares sessions (DISCARD ALL, DEALLOCATE, a transaction-mode pooler). Plain text is
        // right on any session, so this engine sends text from now on. The failed message ran nothing (the
        // server refused its Parse or Bind), so outside a transaction the call is simply sent again.
        this.#named = false;
        if (db.isTransaction) throw error;
        return await db.query<R>(text.text, args, undefined, last);
      }
    } catch (error) {
      if (!db.isTransaction || ranAlone(error)) markSent(error, `the call of ${fn}`);
      throw error;
    }
  }

  #build(fn: StatementFunction): CallText {
    const { marker, arity, answer } = FUNCTIONS[fn];
    const params = Array.from({ length: arity }, (_, i) => `$${i + 1}`).join(", ");
    const target = `"${this.schema}"."${fn}"(${params})`;
    const text = `/* idempo:${marker} */ SELECT ${answer === "row" ? `* FROM ${target}` : `${target} AS ok`}`;
    // A name within PostgreSQL's 63 bytes that changes with the text, so two texts never share one.
    const name = `idempo_${createHash("sha1").update(text).digest("hex").slice(0, 24)}`;
    const built = { text, name };
    this.#texts.set(fn, built);
    return built;
  }
}
