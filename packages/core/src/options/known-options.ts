/**
 * The known options of every options object of `@idempo/core`, one shape
 * per API (see {@link checkOptions}). A new option is added here and in its
 * interface: a key missing here is refused as unknown.
 */
import type { OptionKind } from "./option-shape.js";
import { ANY, ARRAY, BOOLEAN, FUNCTION, INTEGER, OBJECT, optionKind, optionShape, STRING } from "./option-shape.js";

const hasFunctions = (value: unknown, names: readonly string[]): boolean =>
  (typeof value === "object" || typeof value === "function") &&
  value !== null &&
  names.every((name) => typeof (value as Record<string, unknown>)[name] === "function");

/** A Kysely instance, or a data layer (`fromDrizzle(db)`, `fromNodePostgres(pool)`, one of the application's). */
const DATA_LAYER = optionKind(
  "a Kysely instance (new Kysely({ dialect })) or a data layer (fromDrizzle(db), fromNodePostgres(pool))",
  (v) => hasFunctions(v, ["selectFrom", "transaction"]) || hasFunctions(v, ["query", "transaction", "sessionOf"]),
);
const LOGGER = optionKind("a logger with debug, info, warn and error functions (pino, console)", (v) =>
  hasFunctions(v, ["debug", "info", "warn", "error"]),
);
/** A `pg.Pool`, a connected `pg.Client` or a PGlite instance (see `NotificationSource`). */
const NOTIFICATION_SOURCE: OptionKind = optionKind(
  "a pg.Pool, a dedicated, connected pg.Client or a PGlite instance",
  (v) => hasFunctions(v, ["listen"]) || hasFunctions(v, ["query", "on", "off"]),
);

/** `createEngine(options)`. */
export const ENGINE_OPTIONS = optionShape(
  {
    db: DATA_LAYER,
    schema: STRING,
    leaseMs: INTEGER,
    heartbeatMs: INTEGER,
    retentionMs: INTEGER,
    logger: LOGGER,
    attemptTimeoutMs: INTEGER,
    listen: NOTIFICATION_SOURCE,
    listenCheckMs: INTEGER,
    answerTimeoutMs: INTEGER,
    workflows: ARRAY,
    preparedStatements: BOOLEAN,
    maxPayloadBytes: INTEGER,
    rateLimits: OBJECT,
    unavailableRetryMs: INTEGER,
  },
  // `db` is not required here: an engine made before its database exists (a test file's) fails at its first call.
);

/** `runOnce(workflow, request)`; the key, tenant and input have checks of their own. */
export const RUN_ONCE_REQUEST = optionShape({ tenantId: ANY, key: ANY, input: ANY, waitInFlightMs: INTEGER });

/** `enqueue(tx, workflow, request)`; `priority` is range-checked by `enqueue`. */
export const ENQUEUE_REQUEST = optionShape({ tenantId: ANY, key: ANY, input: ANY, priority: INTEGER });

/** `wait(tenantId, key, options)`. */
export const WAIT_OPTIONS = optionShape({ timeoutMs: INTEGER }, ["timeoutMs"]);

/** `resumeStale(options)`; `workflows` is checked by `deployedByName`. */
export const RESUME_STALE_OPTIONS = optionShape({ workflows: ANY, limit: INTEGER });

/** `sweep(options)`. */
export const SWEEP_OPTIONS = optionShape({ batchSize: INTEGER, maxBatches: INTEGER, outboxRetentionMs: INTEGER });

/** `startWorker(options)`. */
export const WORKER_OPTIONS = optionShape({
  workflows: ANY,
  limit: INTEGER,
  intervalMs: INTEGER,
  concurrency: INTEGER,
  workflowConcurrency: OBJECT,
  listen: NOTIFICATION_SOURCE,
  listenCheckMs: INTEGER,
  answerTimeoutMs: INTEGER,
  sweep: BOOLEAN,
  schedules: BOOLEAN,
  onError: FUNCTION,
});

/** `schedule(name, options)`; the cron, zone, workflow, tenant and catch-up have checks of their own. */
export const SCHEDULE_OPTIONS = optionShape(
  {
    cron: STRING,
    timezone: STRING,
    workflow: ANY,
    tenantId: ANY,
    input: FUNCTION,
    catchUp: STRING,
    graceMs: INTEGER,
  },
  ["cron", "workflow", "tenantId"],
);

/** `startRelay(options)`. */
export const RELAY_OPTIONS = optionShape(
  {
    handlers: OBJECT,
    concurrency: INTEGER,
    maxAttempts: INTEGER,
    backoffMs: INTEGER,
    maxBackoffMs: INTEGER,
    leaseMs: INTEGER,
    pollIntervalMs: INTEGER,
    listen: NOTIFICATION_SOURCE,
    listenCheckMs: INTEGER,
    answerTimeoutMs: INTEGER,
    onError: FUNCTION,
  },
  ["handlers"],
);

/** `listKeys(options)`; tenant and workflow are checked as keys, status against its values. */
export const LIST_KEYS_OPTIONS = optionShape({
  tenantId: ANY,
  workflow: ANY,
  status: ANY,
  stuck: BOOLEAN,
  limit: INTEGER,
  cursor: STRING,
});

/** `listOutbox(options)`. */
export const LIST_OUTBOX_OPTIONS = optionShape({ tenantId: ANY, status: ANY, topic: ANY, limit: INTEGER });

/** `overview(options)`; the window is checked against its values. */
export const OVERVIEW_OPTIONS = optionShape({ window: ANY });

/** `listScheduleTicks(options)`. */
export const LIST_SCHEDULE_TICKS_OPTIONS = optionShape({ next: INTEGER, last: INTEGER });

/** `cancel(tenantId, key, options)`. */
export const CANCEL_OPTIONS = optionShape({ status: INTEGER, body: ANY });

/** `retryFrom(tenantId, key, itemName, options)`. */
export const RETRY_FROM_OPTIONS = optionShape({ resendOutbox: BOOLEAN });

/** `signal(tenantId, key, name, payload, options)`. */
export const SIGNAL_OPTIONS = optionShape({
  tx: optionKind(
    "the caller's transaction (a Kysely tx of db.transaction().execute(async (tx) => ...), not a Kysely " +
      "instance; a Drizzle tx; a node-postgres client inside BEGIN): the signal is written in it and commits with it",
    // A Kysely instance is refused here: the data layer would run the signal's statements in autocommit.
    (v) =>
      typeof v === "object" &&
      v !== null &&
      (!hasFunctions(v, ["withoutPlugins"]) || (v as { isTransaction?: unknown }).isTransaction === true),
  ),
});

/** `forget(tenantId, key, options)`. */
export const FORGET_OPTIONS = optionShape({ force: BOOLEAN });

/** `outbox.enqueue(topic, payload, options)` in a phase; the delivery key is checked as a key. */
export const OUTBOX_ENQUEUE_OPTIONS = optionShape({ deliveryKey: ANY });

/** `workflow(name, options)`; `onUnknownError` is checked against its values. */
export const WORKFLOW_OPTIONS = optionShape({
  retentionMs: INTEGER,
  tombstoneMs: INTEGER,
  leaseMs: INTEGER,
  maxAttempts: INTEGER,
  attemptTimeoutMs: INTEGER,
  lockTimeoutMs: INTEGER,
  onUnknownError: ANY,
});

/** `.step(name, fn, options)`. */
export const STEP_OPTIONS = optionShape({
  retries: INTEGER,
  retryable: FUNCTION,
  backoffMs: INTEGER,
  maxBackoffMs: INTEGER,
  timeoutMs: INTEGER,
  reconcile: FUNCTION,
  rateLimit: STRING,
});

/** `.parallel(name, build, options)`; each branch's options are a `.step`'s. */
export const PARALLEL_OPTIONS = optionShape({ concurrency: INTEGER });

/** `.map(name, workflow, inputs, options)`: how many children run at once, and the parent's longest wait. */
export const MAP_OPTIONS = optionShape({ concurrency: INTEGER, timeoutMs: INTEGER });

/** `.child(name, workflow, input, options)`: the parent's longest wait. */
export const CHILD_OPTIONS = optionShape({ timeoutMs: INTEGER });

/** `.concurrency(options)`; `max` is range-checked by the builder. */
export const CONCURRENCY_OPTIONS = optionShape({ key: FUNCTION, max: INTEGER }, ["key", "max"]);

/** One entry of `createEngine({ rateLimits })`; which rate is given, and the ranges, are checked by the engine. */
export const RATE_LIMIT_OPTIONS = optionShape({ perSecond: INTEGER, perMinute: INTEGER, burst: INTEGER });

/** `.waitFor(name, options)`; the schema is checked as a zod schema. */
export const WAIT_FOR_OPTIONS = optionShape({ timeoutMs: INTEGER, onTimeout: FUNCTION, schema: ANY });

/** `withPreparedStatements(pool, options)`. */
export const PREPARED_STATEMENTS_OPTIONS = optionShape({ onConnectionError: FUNCTION });
