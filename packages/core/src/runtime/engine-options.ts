/** The settings `createEngine` takes (checked in `engine-context.ts`). */
import type { DataLayer } from "../database/data-layer.js";
import type { KyselyDatabase } from "../database/kysely-types.js";
import type { Logger } from "../telemetry/logger.js";
import type { Workflow } from "../workflow/definition.js";
import type { ListenCheckOptions } from "./background/listen-options.js";
import type { NotificationSource } from "./background/notifications.js";
import type { RateLimitOptions } from "./rate-limit-options.js";

/** Settings of an engine. */
export interface EngineOptions<DB> extends ListenCheckOptions {
  /**
   * The application's data layer, on the database where idempo's tables
   * live: its Kysely instance (node-postgres or PGlite) as it is, or a data
   * layer made by `fromDrizzle(db)` (Drizzle on node-postgres or PGlite),
   * `fromNodePostgres(pool)`, or the application itself (`DataLayer`).
   * Phases get its transaction as `tx`.
   */
  db: KyselyDatabase<DB> | DataLayer<unknown>;
  /** Postgres schema for idempo's tables (Default: `idempo`). */
  schema?: string;
  /** Lease length in ms: how long an attempt may work between renewals before another may take over (Default: 30 000). */
  leaseMs?: number;
  /** Heartbeat interval in ms; keep it well under the shortest lease (Default: a third of each run's lease). */
  heartbeatMs?: number;
  /** Retention of completed records in ms when a workflow sets none (Default: 86 400 000, 24 h). */
  retentionMs?: number;
  /**
   * Where idempo logs what an operator needs to know (takeovers, lost
   * leases, relay retries and dead letters, failed resumes), once per event,
   * with structured fields. pino's call shape: `logger.warn(fields, message)`;
   * pino and `console` fit as they are. idempo never writes to the console on
   * its own (Default: no logging).
   */
  logger?: Logger;
  /**
   * The longest one attempt may hold a key, in ms, when a workflow sets no
   * `attemptTimeoutMs` (Default: 900 000, 15 min). Past it renewal stops,
   * the attempt gives the key up and its `signal` aborts; see `WorkflowOptions.attemptTimeoutMs`.
   */
  attemptTimeoutMs?: number;
  /**
   * A connection to LISTEN on, so `engine.wait` and `runOnce`'s
   * `waitInFlightMs` wake the moment a run they wait for completes
   * (Default: poll only; polling is always the guarantee). Best a `pg.Pool`
   * of its own (`max: 1`): the engine checks out one client, checks it every
   * `listenCheckMs`, and when it fails, ends or stops answering within
   * `answerTimeoutMs`, logs it once, releases it destroyed and checks out a
   * new one on a later check (logged too). A dedicated, connected
   * `pg.Client` (never one from the application's pool) is checked the same
   * way but cannot reconnect. Or a PGlite instance.
   */
  listen?: NotificationSource;
  /**
   * Workflows this engine may be asked about without being handed them:
   * `engine.signal` checks a payload against its `.waitFor` schema when it
   * knows the run's workflow from here, or from an earlier `runOnce`,
   * `enqueue`, `resumeStale` or `startWorker` of this engine (Default: none).
   */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  workflows?: readonly Workflow<any, any>[];
  /**
   * Send the engine's hot-path statements (the calls of its statement
   * functions: claim, takeover, commits, renewal) as prepared statements,
   * parsed and planned once per connection, where the data layer prepares
   * them: node-postgres (Kysely's `PostgresDialect`, Drizzle's node-postgres
   * driver, `fromNodePostgres`); other drivers always get plain text
   * (Default: true). Set false behind a pooler that cannot keep prepared
   * statements across transactions, such as PgBouncer before 1.21 in
   * transaction mode (a pool wrapped with `withPreparedStatements` still
   * names them). The application's own queries are never prepared. A
   * session that loses them (`DISCARD ALL`, `DEALLOCATE`) turns it off for
   * the engine: its calls go as text from then on. On node-postgres,
   * Kysely's `log` callback sees every engine statement's
   * `event.query.sql`, prepared or not, as an object that reads like its
   * text (`String(sql)` gives the string itself).
   */
  preparedStatements?: boolean;
  /**
   * The largest value the engine stores, in bytes of its canonical JSON
   * (UTF-8), 1 to 1 073 741 823, each value on its own: an input, a signal
   * payload, a phase or step result, an outbox payload, a response body
   * (`respond`, `ctx.fail`, `accepted`, `cancel`). A larger one raises
   * `PayloadTooLargeError` (413) before anything is written; one a run
   * produces parks the run. State grows with every result and is written
   * at every commit, so keep large data elsewhere and store a reference
   * (Default: 1 048 576, 1 MiB).
   */
  maxPayloadBytes?: number;
  /**
   * Token buckets shared by every process on the database, by name (1-128
   * letters, digits, `.`, `_`, `-`), for steps that name one in their
   * `rateLimit` option: `{ perSecond | perMinute, burst? }`. Each bucket is
   * one row, refilled on the database clock; give every process the same
   * settings for a name (each takes tokens with its own). A step whose
   * `rateLimit` is not here raises `WorkflowDefinitionError` when this
   * engine is first given its workflow, or a parent of it (Default: none). See docs/limits.md.
   *
   * @example
   * ```ts
   * const engine = createEngine({ db, rateLimits: { stripe: { perSecond: 25, burst: 50 } } })
   * ```
   */
  rateLimits?: Readonly<Record<string, RateLimitOptions>>;
  /**
   * How long, in ms, the engine keeps sending again, in place, work the
   * database refused without running any of it: a write that reached a
   * node that takes none (SQLSTATE 25006, a standby, or a primary during
   * a failover before its promotion finished or while it is demoted), or
   * a connection that could not be made (57P03 "not accepting connections
   * yet", a refused or timed-out connect). It covers a phase's transaction
   * (begun again from the start) and the engine's own statements outside
   * one (claim, takeover, step records, completion, renewal), with pauses
   * from 50 ms doubling to 1 s. Past it, or for a connection that broke
   * after the work was sent, the call raises `DatabaseUnavailableError`
   * (whose `inDoubt` names a COMMIT that may have landed). 0 to
   * 2 147 483 647; 0 raises at once (Default: 10 000, longer than a
   * Patroni failover; see docs/operations.md).
   */
  unavailableRetryMs?: number;
}
