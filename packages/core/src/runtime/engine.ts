import type { Kysely, Transaction } from "kysely";
import {
  DatabaseUnavailableError,
  IdempoError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidOptionError,
  RunNotFoundError,
  RunParkedError,
  RunStateError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "../errors.js";
import { newId } from "../ids.js";
import { requestFingerprint } from "../json/fingerprint.js";
import type { JsonObject, JsonValue } from "../json/json-value.js";
import { toJsonValue } from "../json/json-value.js";
import { schemaIssue } from "../json/schema-issue.js";
import { assertValidKey } from "../keys/key-validation.js";
import type { NewRun } from "../store/claim.js";
import { claimNewKey, reclaimExpiredKey, takeOverExpiredLease } from "../store/claim.js";
import { msUntilNextWake, selectDueRuns, takeDueRun } from "../store/due-runs.js";
import { enqueueRun, reclaimExpiredForEnqueue } from "../store/enqueue.js";
import { selectStaleRuns, sweepBatch, sweepOutboxBatch } from "../store/maintenance.js";
import { applyMigrations } from "../store/migrate.js";
import { selectHistory, selectOutcome, selectRecord, selectRecords } from "../store/operations.js";
import type { Executor, TakenRun } from "../store/run-store.js";
import { tablesIn } from "../store/run-store.js";
import { deliverSignal, lockRunForSignal, TIMED_OUT } from "../store/signals.js";
import type { Logger } from "../telemetry/logger.js";
import { SILENT } from "../telemetry/logger.js";
import type { ClaimResult, SpanScope } from "../telemetry/telemetry.js";
import { keyHash, Telemetry } from "../telemetry/telemetry.js";
import type { Definition, Workflow } from "../workflow/definition.js";
import { deployedByName, versionsOf } from "../workflow/versions.js";
import type { AdminApi } from "./admin-api.js";
import { adminApi } from "./admin-api.js";
import type { Watch } from "./completion-waiter.js";
import { completionWaiter, FIRST_PAUSE_MS, MAX_PAUSE_MS } from "./completion-waiter.js";
import { isConnectionLoss } from "./db-errors.js";
import { startDueLoop } from "./due-loop.js";
import type { ExecutorDeps } from "./executor.js";
import { execute } from "./executor.js";
import { faultHookOf, heartbeatSilenced } from "./hooks.js";
import type { NotificationSource } from "./notifications.js";
import type { OperatorVerbs } from "./operator-verbs.js";
import { operatorVerbs } from "./operator-verbs.js";
import { checkHeartbeat, intOption, MAX_TIMER_MS } from "./option-checks.js";
import type { KeyPage, ListKeysOptions, RunRecord } from "./records.js";
import { decodeCursor, encodeCursor, toRecord } from "./records.js";
import type { Relay, RelayOptions } from "./relay.js";
import { startRelay } from "./relay.js";
import { pickDefinition } from "./resumable.js";
import type { DueReport, ResumeDueOptions } from "./resume-due.js";
import { attachDueResumer } from "./resume-due.js";
import type { RunResult } from "./run-result.js";
import { deepFreeze, inputToJson, parsedInputHash, parseInput, reparseInput } from "./values.js";
import type { Worker } from "./worker.js";
import { startLoop } from "./worker.js";

/** Settings of an engine. */
export interface EngineOptions<DB> {
  /** The application's Kysely instance (pg pool or PGlite); idempo's tables live in the same database. */
  db: Kysely<DB>;
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
   * `waitInFlightMs` wake the moment a run they wait for completes: a
   * dedicated, connected `pg.Client` (never one from the pool), or a PGlite
   * instance (Default: poll only; polling is always the guarantee).
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
   * parsed and planned once per connection, when `db` is Kysely's
   * `PostgresDialect` on node-postgres; other drivers always get plain text
   * (Default: true). Set false behind a pooler that cannot keep prepared
   * statements across transactions, such as PgBouncer before 1.21 in
   * transaction mode (a pool wrapped with `withPreparedStatements` still
   * names them). The application's own queries are never prepared. A
   * session that loses them (`DISCARD ALL`, `DEALLOCATE`) turns it off for
   * the engine: its calls go as text from then on. Kysely's `log` callback
   * sees a prepared call's `event.query.sql` as an object that reads like
   * its text (`String(sql)` gives the string itself).
   */
  preparedStatements?: boolean;
}

/** The arguments of one `runOnce` call. */
export interface RunOnceRequest<In> {
  /** The scope the key belongs to; every lookup includes it. Same rules as the key. */
  tenantId: string;
  /** The client's idempotency key: 1-255 UTF-8 bytes, no control characters, case-sensitive, never trimmed. */
  key: string;
  /** The request; JSON values only (a Date becomes its ISO string). Checked by the workflow's schema. */
  input: In;
  /**
   * When another attempt holds the key (in flight elsewhere, or suspended),
   * wait up to this many ms for its stored response instead of raising
   * `IdempotencyKeyInProgressError` at once; a lease that runs out or a
   * suspension that becomes due meanwhile is taken over and resumed here.
   * Woken by NOTIFY when the engine has a `listen` connection, by polling
   * otherwise; no pooled connection is held while waiting.
   * 0 to 2 147 483 647 (Default: 0, answer at once).
   */
  waitInFlightMs?: number;
}

/** The arguments of one `enqueue` call: the run's key and input, as for `runOnce`. */
export type EnqueueRequest<In> = Omit<RunOnceRequest<In>, "waitInFlightMs">;

/** What `enqueue` did. */
export interface EnqueueResult {
  /**
   * True when this call created the run (it exists once the caller's
   * transaction commits); false when the key already names the same
   * request (in any state): nothing was changed.
   */
  readonly created: boolean;
}

/** What `signal` did. */
export interface SignalResult {
  /**
   * True when the same signal (name and canonical payload) had already been
   * delivered to the run: nothing was changed.
   */
  readonly duplicate: boolean;
  /** True when the run was suspended waiting for this signal and is now due. */
  readonly woke: boolean;
}

/** Options of `engine.wait`. */
export interface WaitOptions {
  /** The longest to wait, in ms, 0 to 2 147 483 647; then `IdempotencyKeyInProgressError`. */
  timeoutMs: number;
}

/** An idempo engine bound to one database; see {@link createEngine}. */
export interface Engine extends AdminApi, OperatorVerbs {
  /**
   * Run `workflow` once for `(tenantId, key)`: claim the key and execute, or
   * replay the stored response, or take over an expired lease and resume
   * after the last recovery point. New runs take `workflow`'s version; a
   * stored run resumes under its own version when `workflow` replaces it
   * (see `WorkflowBuilder.version`).
   *
   * @returns the response, with `replayed: true` when it came from the stored record.
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) input not JSON or rejected by the schema, before any claim.
   * @throws IdempotencyKeyInProgressError (409) another attempt holds a valid lease; see `retryAfterMs`.
   * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
   * @throws LeaseLostError (409) this attempt was taken over while it worked.
   * @throws WorkflowDefinitionError (500) no deployed version (`workflow` and those it replaces) can finish the stored run.
   * @throws RunParkedError (500) the run is parked, or this takeover would exceed the workflow's `maxAttempts` and parked it.
   * Any error thrown by workflow code is rethrown; the run stays at its recovery point.
   */
  runOnce<In, B>(workflow: Workflow<In, B>, request: RunOnceRequest<In>): Promise<RunResult<B>>;
  /**
   * Create a run inside the caller's own Kysely transaction: it exists
   * exactly when that transaction commits (and a NOTIFY sent in it wakes
   * the workers then). The run is `suspended` and due at once with attempt
   * 0 until a worker (`startWorker`) or a `runOnce` with the same key and
   * payload takes it. Same claim rules as `runOnce`: the same key with the
   * same payload is a no-op (`created: false`), another payload or
   * workflow is a mismatch; a completed record past retention counts as absent.
   *
   * @param tx the caller's transaction (or the database itself, for a run created on its own).
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) input not JSON or rejected by the schema, before any SQL.
   * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
   */
  enqueue<DB, In>(
    tx: Transaction<DB> | Kysely<DB>,
    workflow: Workflow<In, unknown>,
    request: EnqueueRequest<In>,
  ): Promise<EnqueueResult>;
  /**
   * Deliver a signal to a run's `.waitFor(name)` item: the JSON `payload`
   * is kept (also when the run has not reached the item yet) and merged
   * into state as `{ [name]: payload }` when it does; a run suspended on
   * the item becomes due at once. The same name with the same canonical
   * payload again is a no-op (`duplicate: true`), also after the run completed.
   *
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) the payload is not JSON or fails the wait's schema, or the run's workflow waits for no such name.
   * @throws IdempotencyKeyMismatchError (422) a different payload was already delivered under this name.
   * @throws RunStateError (409) the run is completed and this signal is new, or the wait timed out before it arrived.
   * @throws RunNotFoundError (404) the key has no record (or only one past retention).
   */
  signal(tenantId: string, key: string, name: string, payload: unknown): Promise<SignalResult>;
  /**
   * Wait for a run to complete and return its stored response
   * (`replayed: true`), without taking part in it. Woken by NOTIFY when the
   * engine has a `listen` connection, by polling (the guarantee) otherwise;
   * no pooled connection is held between polls.
   *
   * @throws IdempotencyKeyInProgressError (409) still not completed at the timeout; `retryAfterMs` as for `runOnce`.
   * @throws RunParkedError (500) the run is parked: it will not complete on its own.
   * @throws RunNotFoundError (404) the key has no record (or only one past retention).
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant.
   */
  wait(tenantId: string, key: string, options: WaitOptions): Promise<RunResult<unknown>>;
  /** Apply pending SQL migrations under an advisory lock; returns the names applied. Safe to call concurrently. */
  migrate(): Promise<string[]>;
  /** The record of one key with its history, or `null` when absent. Lease time uses the DB clock. */
  inspect(tenantId: string, key: string): Promise<RunRecord | null>;
  /** One page of records, newest first; pass `nextCursor` back for the next page. */
  listKeys(options?: ListKeysOptions): Promise<KeyPage>;
  /**
   * Finish abandoned runs: find in-flight runs of the given workflows whose
   * lease expired, take each over with the same atomic statement a client
   * retry uses (so resumers and clients race safely), and run it to the end
   * from its recovery point with the stored input.
   */
  resumeStale(options: ResumeStaleOptions): Promise<ResumeReport>;
  /**
   * Delete completed records past retention in bounded batches (SKIP LOCKED;
   * never in-flight records). Expired records already count as absent, so
   * sweeping only reclaims space. Also deletes outbox messages delivered
   * longer ago than `outboxRetentionMs` (pending and dead ones stay).
   * @returns how many key records were deleted.
   */
  sweep(options?: SweepOptions): Promise<number>;
  /**
   * Execute background runs: claim due suspended runs of the given
   * workflows (enqueued, woken sleeps, signalled or timed-out waits) with
   * `FOR UPDATE SKIP LOCKED`, fairly across tenants and within per-workflow
   * limits, and run each from its recovery point; also run `resumeStale`
   * and `sweep` every `intervalMs`. Any number of workers (in any number of
   * processes) may run at once: each run is executed by one of them.
   * `await worker.stop()` waits for the runs it is finishing.
   */
  startWorker(options: WorkerOptions): Worker;
  /**
   * Deliver outbox messages at least once: claim due messages (SKIP LOCKED),
   * call the topic's handler outside any transaction with a stable
   * `deliveryKey`, mark delivered; back off and finally dead-letter on failure.
   */
  startRelay(options: RelayOptions): Relay;
}

/** Options of `resumeStale`. */
export interface ResumeStaleOptions {
  /**
   * The workflow definitions this process can run; runs of other workflows
   * are left alone. May hold several versions of one workflow: each run
   * resumes under its own version (see `WorkflowBuilder.version`).
   */
  // biome-ignore lint/suspicious/noExplicitAny: any workflow, whatever its input and body types
  workflows: readonly Workflow<any, any>[];
  /** Most runs to take over in one call (Default: 100). */
  limit?: number;
}

/**
 * What `resumeStale` did, run by run. A run that fails lands in `failed`
 * and never stops the others; a run whose attempts ran out is parked by its
 * takeover and lands in `parked` (it is not taken over again).
 */
export interface ResumeReport {
  readonly resumed: readonly { tenantId: string; key: string; workflow: string; status: number; outcome: string }[];
  readonly failed: readonly { tenantId: string; key: string; workflow: string; error: Error }[];
  readonly parked: readonly { tenantId: string; key: string; workflow: string; reason: string }[];
}

/** Options of `sweep`. */
export interface SweepOptions {
  /** Records per batch, i.e. per short transaction (Default: 500). */
  batchSize?: number;
  /** Most batches in one call, per table (Default: 100). */
  maxBatches?: number;
  /** Keep delivered outbox messages this long in ms before deleting them (Default: 604 800 000, 7 days). */
  outboxRetentionMs?: number;
}

/** Options of `startWorker`. */
export interface WorkerOptions extends ResumeStaleOptions {
  /**
   * Pause between maintenance rounds (resumeStale, sweep) in ms, and the
   * longest a worker goes without looking for due runs when nothing wakes
   * it (Default: 5 000).
   */
  intervalMs?: number;
  /** Due runs this worker executes at once, 1-1 000 (Default: 10). */
  concurrency?: number;
  /**
   * Most runs of one workflow this worker executes at once, by workflow
   * name (Default: no limit beyond `concurrency`). A limit per worker: with
   * N workers a workflow may run N times its limit.
   */
  workflowConcurrency?: Readonly<Record<string, number>>;
  /**
   * A connection to LISTEN on, so the worker wakes the moment a run is
   * enqueued or signalled: a dedicated, connected `pg.Client`, or a PGlite
   * instance, one per worker (Default: poll only; polling is the guarantee).
   */
  listen?: NotificationSource;
  /** Also sweep expired records each round (Default: true). */
  sweep?: boolean;
  /** Called with errors of a round; the loop goes on (Default: ignore). */
  onError?: (error: unknown) => void;
}

const DEFAULT_LEASE_MS = 30_000;
/** SPEC: a workflow that sets no `maxAttempts` gets 20. */
const DEFAULT_MAX_ATTEMPTS = 20;
const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;
/** Long enough for any healthy request or job, short enough that a hung one frees its key the same hour. */
const DEFAULT_ATTEMPT_TIMEOUT_MS = 15 * 60 * 1000;
/** Claim rounds before giving up on a key that keeps changing under us (a 409 then). */
const CLAIM_ROUNDS = 8;

/** Longest retention accepted: 100 years (the DB clock arithmetic stays far from overflow). */
const MAX_RETENTION_MS = 100 * 365 * 24 * 60 * 60 * 1000;

/**
 * Create an engine on the application's Kysely database.
 *
 * @example
 * const engine = createEngine({ db })
 * await engine.migrate()
 * const res = await engine.runOnce(checkout, { tenantId: 'acme', key: 'k-123', input })
 *
 * @throws InvalidOptionError when an option is out of range (naming it and the range).
 * @throws WorkflowDefinitionError when the schema name is not a plain SQL identifier.
 */
export function createEngine<DB>(options: EngineOptions<DB>): Engine {
  const appDb = options.db as unknown as ExecutorDeps["phaseDb"];
  // The engine reads its own columns by their names: the application's plugins (CamelCasePlugin) are for its rows.
  const db = typeof appDb?.withoutPlugins === "function" ? appDb.withoutPlugins() : appDb;
  if (options.preparedStatements !== undefined && typeof options.preparedStatements !== "boolean") {
    throw new InvalidOptionError(
      "preparedStatements",
      `createEngine: preparedStatements must be true or false, got ${JSON.stringify(options.preparedStatements)}`,
    );
  }
  const tables = tablesIn(options.schema ?? "idempo", options.preparedStatements ?? true);
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(tables.schema)) {
    throw new WorkflowDefinitionError(`schema must be a plain SQL identifier, got ${JSON.stringify(tables.schema)}`);
  }
  const where = "createEngine";
  const leaseMs = intOption(where, "leaseMs", options.leaseMs, 1, MAX_TIMER_MS, DEFAULT_LEASE_MS);
  // Unset, the heartbeat follows each run's own lease (a workflow may shorten it).
  const heartbeatMs = intOption(where, "heartbeatMs", options.heartbeatMs, 1, MAX_TIMER_MS);
  checkHeartbeat(where, heartbeatMs, leaseMs);
  const retentionMs = intOption(where, "retentionMs", options.retentionMs, 1, MAX_RETENTION_MS, DEFAULT_RETENTION_MS);
  const attemptTimeoutMs = intOption(
    where,
    "attemptTimeoutMs",
    options.attemptTimeoutMs,
    1,
    MAX_TIMER_MS,
    DEFAULT_ATTEMPT_TIMEOUT_MS,
  );
  const boundOf = (def: Definition) => def.options.attemptTimeoutMs ?? attemptTimeoutMs;

  const telemetry = new Telemetry(options.logger ?? SILENT);
  const waiter = completionWaiter(options.listen, (error) =>
    telemetry.log("warn", { error: String(error) }, "idempo: LISTEN for completions failed; waiters poll instead"),
  );
  /**
   * Definitions this engine has been given or has run, by name, every
   * deployed version newest first: what `signal` checks payloads against
   * (the run's own version when it is among them).
   */
  const known = new Map<string, readonly Definition[]>();
  const remember = (versions: readonly Definition[]) => {
    const newest = versions[0];
    if (newest?.items) known.set(newest.name, versions);
  };
  /** `remember` for the workflow of a call: nothing to do on the hot path once it is known. */
  const rememberCalled = (def: Definition) => {
    if (known.get(def.name)?.[0] !== def) remember(versionsOf(def));
  };
  if (options.workflows !== undefined) {
    for (const versions of deployedByName("createEngine", options.workflows).values()) remember(versions);
  }
  const deps = (): ExecutorDeps => ({
    db,
    phaseDb: appDb,
    tables,
    heartbeatMs,
    hook: faultHookOf(engine),
    silentHeartbeat: heartbeatSilenced(engine),
    telemetry,
  });

  /** A takeover that would have started attempt maxAttempts + 1 parked the run instead. */
  const parkedByTakeover = (workflowName: string, tenantId: string, key: string, reason: string) => {
    telemetry.count("parked", { "idempo.workflow": workflowName, "idempo.parked.reason": "max_attempts" });
    telemetry.log(
      "warn",
      { workflow: workflowName, tenantId, keyHash: keyHash(tenantId, key), reason },
      "idempo: run parked: it used up its attempts; fix the cause, then unpark it",
    );
  };

  /** Attributes that name a run on spans: the key only as a hash. */
  const runAttributes = (workflowName: string, tenantId: unknown, key: unknown) => ({
    "idempo.workflow": workflowName,
    ...(typeof tenantId === "string" ? { "idempo.tenant_id": tenantId } : {}),
    ...(typeof tenantId === "string" && typeof key === "string" ? { "idempo.key.hash": keyHash(tenantId, key) } : {}),
  });

  function runOnce<In, B>(wf: Workflow<In, B>, request: RunOnceRequest<In>): Promise<RunResult<B>> {
    const name = wf?.definition?.name ?? "unknown";
    const attributes = () => runAttributes(name, request?.tenantId, request?.key);
    const started = performance.now();
    return telemetry.span(`runOnce ${name}`, "internal", attributes, async (span) => {
      const claimed = (result: ClaimResult) => {
        span.set({ "idempo.claim.result": result });
        telemetry.count("claims", { "idempo.workflow": name, "idempo.claim.result": result });
      };
      try {
        const result = await guardedRun(wf, request, span, claimed);
        span.set({ "idempo.outcome": result.outcome, "idempo.replayed": result.replayed });
        return result;
      } finally {
        telemetry.duration("runDuration", performance.now() - started, { "idempo.workflow": name });
      }
    });
  }

  async function guardedRun<In, B>(
    wf: Workflow<In, B>,
    request: RunOnceRequest<In>,
    span: SpanScope,
    claimed: (result: ClaimResult) => void,
  ): Promise<RunResult<B>> {
    try {
      return await claimAndRun(wf, request, span, claimed);
    } catch (error) {
      if (!(error instanceof IdempoError) && isConnectionLoss(error)) throw new DatabaseUnavailableError(error);
      // A missing table, statement function (a schema migrated by an older release) or schema.
      const missing = ["42P01", "42883", "3F000"].includes(String((error as { code?: string }).code));
      if (missing && String((error as Error).message).includes(tables.schema)) {
        throw new WorkflowUsageError(
          `idempo's tables or functions are missing in schema '${tables.schema}': run engine.migrate() (or \`idempo migrate\`) before runOnce`,
        );
      }
      throw error;
    }
  }

  async function claimAndRun<In, B>(
    wf: Workflow<In, B>,
    request: RunOnceRequest<In>,
    span: SpanScope,
    claimed: (result: ClaimResult) => void,
  ): Promise<RunResult<B>> {
    const def = wf?.definition;
    if (!def) throw new WorkflowDefinitionError("runOnce needs a workflow built with workflow(...).respond(...)");
    rememberCalled(def);
    assertValidKey(request?.tenantId, "tenant id");
    assertValidKey(request.key, "idempotency key");
    const json = inputToJson(request.input);
    const input = await parseInput(def, json);
    const fingerprint = requestFingerprint(def.name, json);
    const parsedHash = def.schema ? parsedInputHash(input) : null;
    const inputText = JSON.stringify(json);
    const runLease = def.options.leaseMs ?? leaseMs;
    checkHeartbeat(`workflow '${def.name}'`, heartbeatMs, runLease);
    const { tenantId, key } = request;

    const waitMs = intOption("runOnce", "waitInFlightMs", request.waitInFlightMs, 0, MAX_TIMER_MS, 0);
    const deadline = performance.now() + waitMs;
    let watch: Watch | undefined;
    let pause = FIRST_PAUSE_MS;
    /**
     * Another attempt holds the key: answer 409 now, or, within
     * `waitInFlightMs`, pause (no connection held) and look again.
     */
    const inProgress = async (retryAfterMs: number): Promise<void> => {
      const left = deadline - performance.now();
      if (left <= 0) {
        claimed("in_progress");
        throw new IdempotencyKeyInProgressError(tenantId, key, Math.max(0, retryAfterMs));
      }
      watch ??= waiter.watch(tenantId, key);
      await watch.pause(Math.min(left, pause, Math.max(1, retryAfterMs)));
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    };
    try {
      for (let round = 0; round < CLAIM_ROUNDS; round++) {
        const answer = await claimRound();
        if (answer === "again") continue;
        if (typeof answer === "number") {
          await inProgress(answer);
          round = -1;
          continue;
        }
        return answer;
      }
    } finally {
      watch?.close();
    }
    claimed("in_progress");
    throw new IdempotencyKeyInProgressError(tenantId, key, 0);

    /** One look at the key: a result, "again" (it changed under us), or the ms to wait when another holds it. */
    async function claimRound(): Promise<RunResult<B> | "again" | number> {
      const fresh: NewRun = {
        tenantId,
        key,
        runId: newId(),
        workflow: def.name,
        workflowVersion: def.version,
        outline: def.outline,
        definitionHash: def.hash,
        fingerprint,
        input: inputText,
        parsedInputHash: parsedHash,
        ownerToken: newId(),
        leaseMs: runLease,
        retentionMs: def.options.retentionMs ?? retentionMs,
      };
      const start = (): Promise<RunResult<B>> => {
        claimed("new");
        span.set({ "idempo.attempt": 1 });
        return execute(deps(), {
          def,
          own: { tenantId, key, runId: fresh.runId, ownerToken: fresh.ownerToken },
          attempt: 1,
          input,
          state: Object.freeze({}),
          recoveryPoint: null,
          leaseMs: runLease,
          span,
          attemptTimeoutMs: boundOf(def),
        }) as Promise<RunResult<B>>;
      };

      const claim = await claimNewKey(db, tables, fresh);
      if (claim.kind === "raced") return "again";
      if (claim.kind === "claimed") return start();
      const found = claim.run;
      if (found.status === "completed" && found.expired) {
        // Past retention the key counts as absent, swept or not.
        if (await reclaimExpiredKey(db, tables, fresh)) return start();
        return "again";
      }
      if (found.workflow !== def.name) {
        claimed("mismatch");
        throw new IdempotencyKeyMismatchError(tenantId, key, `workflow '${found.workflow}', not '${def.name}'`);
      }
      if (found.fingerprint !== fingerprint) {
        claimed("mismatch");
        throw new IdempotencyKeyMismatchError(tenantId, key, "a different request payload");
      }
      if (found.status === "parked") {
        claimed("parked");
        throw new RunParkedError(tenantId, key, found.parkedReason ?? "parked");
      }
      if (found.status === "suspended") {
        if (found.wakeRemainingMs === null) return runLease;
        if (found.wakeRemainingMs > 0) return found.wakeRemainingMs;
        // Due (enqueued, woken, signalled or timed out) and no worker got there first: resume it here.
        const ownerToken = newId();
        const taken = await takeDueRun(db, tables, { tenantId, key, ownerToken, leaseMs: runLease, fingerprint });
        if (!taken) return "again";
        claimed("resume");
        return resume(versionsOf(def), taken, { tenantId, key, ownerToken }, runLease, span, "due") as Promise<
          RunResult<B>
        >;
      }
      if (found.status === "completed") {
        claimed("replay");
        return {
          status: found.responseStatus ?? 500,
          body: JSON.parse(found.responseBody ?? "null") as JsonValue,
          replayed: true,
          outcome: found.outcome ?? "succeeded",
        } as RunResult<B>;
      }
      if (found.leaseRemainingMs > 0) return found.leaseRemainingMs;
      const ownerToken = newId();
      const taken = await takeOverExpiredLease(db, tables, {
        tenantId,
        key,
        ownerToken,
        leaseMs: runLease,
        fingerprint,
        maxAttempts: def.options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      });
      if (!taken) return "again";
      if (taken.kind === "parked") {
        claimed("parked");
        parkedByTakeover(def.name, tenantId, key, taken.reason);
        throw new RunParkedError(tenantId, key, taken.reason);
      }
      claimed("takeover");
      return resume(versionsOf(def), taken.run, { tenantId, key, ownerToken }, runLease, span, "takeover") as Promise<
        RunResult<B>
      >;
    }
  }

  /** Resume a taken-over run under the deployed version that fits it (`deployed`: newest first). */
  async function resume(
    deployed: readonly Definition[],
    taken: TakenRun,
    own: { tenantId: string; key: string; ownerToken: string },
    runLease: number,
    span: SpanScope,
    how: "takeover" | "due",
  ): Promise<RunResult<unknown>> {
    span.set({ "idempo.attempt": taken.attempt });
    const def = deployed[0] as Definition;
    if (how === "takeover") {
      telemetry.log(
        "info",
        {
          workflow: def.name,
          tenantId: own.tenantId,
          keyHash: keyHash(own.tenantId, own.key),
          attempt: taken.attempt,
          recoveryPoint: taken.recoveryPoint,
        },
        "idempo: took over an expired lease; resuming after the recovery point",
      );
    }
    const picked = pickDefinition(deployed, taken);
    return execute(deps(), {
      def: picked,
      own: { ...own, runId: taken.runId },
      attempt: taken.attempt,
      input: await reparseInput(picked, JSON.parse(taken.input) as JsonValue, taken.parsedInputHash),
      state: deepFreeze(JSON.parse(taken.state) as JsonObject),
      recoveryPoint: taken.recoveryPoint,
      leaseMs: runLease,
      span,
      attemptTimeoutMs: boundOf(picked),
    });
  }

  async function resumeStale(opts: ResumeStaleOptions): Promise<ResumeReport> {
    const byName = deployedByName("resumeStale", opts?.workflows);
    for (const versions of byName.values()) remember(versions);
    const limit = intOption("resumeStale", "limit", opts.limit, 1, 10_000, 100);
    const resumed: ResumeReport["resumed"][number][] = [];
    const failed: ResumeReport["failed"][number][] = [];
    const parked: ResumeReport["parked"][number][] = [];
    for (const stale of await selectStaleRuns(db, tables, [...byName.keys()], limit)) {
      const versions = byName.get(stale.workflow) as readonly Definition[];
      const def = versions[0] as Definition;
      const runLease = def.options.leaseMs ?? leaseMs;
      const ownerToken = newId();
      try {
        checkHeartbeat(`workflow '${def.name}'`, heartbeatMs, runLease);
        const res = await telemetry.span(
          `resume ${stale.workflow}`,
          "internal",
          () => runAttributes(stale.workflow, stale.tenantId, stale.key),
          async (span) => {
            const taken = await takeOverExpiredLease(db, tables, {
              ...stale,
              ownerToken,
              leaseMs: runLease,
              fingerprint: null,
              maxAttempts: def.options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
            });
            if (!taken) return null; // a client or another resumer got it first, or its owner renewed
            if (taken.kind === "parked") {
              span.set({ "idempo.claim.result": "parked" });
              parkedByTakeover(def.name, stale.tenantId, stale.key, taken.reason);
              parked.push({ ...stale, reason: taken.reason });
              return null;
            }
            telemetry.count("claims", { "idempo.workflow": stale.workflow, "idempo.claim.result": "takeover" });
            span.set({ "idempo.claim.result": "takeover" });
            const result = await resume(
              versions,
              taken.run,
              { tenantId: stale.tenantId, key: stale.key, ownerToken },
              runLease,
              span,
              "takeover",
            );
            span.set({ "idempo.outcome": result.outcome, "idempo.replayed": false });
            return result;
          },
        );
        if (res) resumed.push({ ...stale, status: res.status, outcome: res.outcome });
      } catch (error) {
        telemetry.log(
          "error",
          {
            workflow: stale.workflow,
            tenantId: stale.tenantId,
            keyHash: keyHash(stale.tenantId, stale.key),
            error: String(error),
          },
          "idempo: resuming a stale run failed; it stays at its recovery point",
        );
        failed.push({ ...stale, error: error instanceof Error ? error : new Error(String(error)) });
      }
    }
    return { resumed, failed, parked };
  }

  async function enqueue<DB, In>(
    // A Transaction<DB> is a Kysely<DB>, but inferring DB through Kysely<DB> alone fails for a typed transaction.
    tx: Transaction<DB> | Kysely<DB>,
    wf: Workflow<In, unknown>,
    request: EnqueueRequest<In>,
  ): Promise<EnqueueResult> {
    const def = wf?.definition;
    if (!def?.items)
      throw new WorkflowDefinitionError("enqueue needs a workflow built with workflow(...).respond(...)");
    if (typeof (tx as { selectFrom?: unknown } | undefined)?.selectFrom !== "function") {
      throw new WorkflowUsageError(
        "enqueue needs the caller's Kysely transaction (or Kysely instance) as its first argument",
      );
    }
    rememberCalled(def);
    assertValidKey(request?.tenantId, "tenant id");
    assertValidKey(request.key, "idempotency key");
    const json = inputToJson(request.input);
    const input = await parseInput(def, json);
    const fingerprint = requestFingerprint(def.name, json);
    const { tenantId, key } = request;
    const run = {
      tenantId,
      key,
      runId: newId(),
      workflow: def.name,
      outline: def.outline,
      definitionHash: def.hash,
      workflowVersion: def.version,
      fingerprint,
      input: JSON.stringify(json),
      parsedInputHash: def.schema ? parsedInputHash(input) : null,
      retentionMs: def.options.retentionMs ?? retentionMs,
    };
    // The caller's transaction, without its plugins (see createEngine).
    const on = (tx as unknown as Executor).withoutPlugins();
    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      const found = await enqueueRun(on, tables, run);
      if (found.kind === "created") return { created: true };
      if (found.kind === "raced") continue;
      if (found.status === "completed" && found.expired) {
        if (await reclaimExpiredForEnqueue(on, tables, run)) return { created: true };
        continue;
      }
      if (found.workflow !== def.name) {
        throw new IdempotencyKeyMismatchError(tenantId, key, `workflow '${found.workflow}', not '${def.name}'`);
      }
      if (found.fingerprint !== fingerprint) {
        throw new IdempotencyKeyMismatchError(tenantId, key, "a different request payload");
      }
      return { created: false };
    }
    throw new IdempotencyKeyInProgressError(tenantId, key, 0);
  }

  async function signal(tenantId: string, key: string, name: string, payload: unknown): Promise<SignalResult> {
    assertValidKey(tenantId, "tenant id");
    assertValidKey(key, "idempotency key");
    assertValidKey(name, "signal name");
    const converted = toJsonValue(payload);
    if (!converted.ok) {
      throw new InputValidationError(converted.issues.map((i) => ({ ...i, path: `payload${i.path.slice(1)}` })));
    }
    const json = converted.value;
    const fingerprint = requestFingerprint(`signal:${name}`, json);
    return db.transaction().execute(async (tx) => {
      const run = await lockRunForSignal(tx, tables, tenantId, key);
      if (!run || run.expired) throw new RunNotFoundError(tenantId, key);
      if (!run.outline.includes(`wait:${name}`)) {
        const waits = run.outline.filter((e) => e.startsWith("wait:")).map((e) => e.slice(5));
        throw new InputValidationError([
          {
            path: "name",
            message: `workflow '${run.workflow}' waits for no signal '${name}' (it waits for: ${
              waits.length > 0 ? waits.join(", ") : "none"
            })`,
          },
        ]);
      }
      // The run's own version when deployed: that is the schema the run parses the payload with.
      const versions = known.get(run.workflow) ?? [];
      const own = versions.find((def) => def.version === run.workflowVersion);
      const item = (own ? [own] : versions)
        .flatMap((def) => def.items)
        .find((i) => i.kind === "wait" && i.name === name);
      if (item?.kind === "wait" && item.options.schema) {
        const parsed = await item.options.schema.safeParseAsync(json);
        if (!parsed.success) {
          throw new InputValidationError(
            parsed.error.issues.map((issue) => {
              const at = schemaIssue(issue, json);
              return { ...at, path: `payload${at.path.slice(1)}` };
            }),
            { cause: parsed.error },
          );
        }
      }
      const done = await deliverSignal(tx, tables, {
        tenantId,
        key,
        runId: run.runId,
        name,
        payload: JSON.stringify(json),
        fingerprint,
        mayStore: run.status !== "completed",
      });
      if (done.existing !== null) {
        if (done.existing === TIMED_OUT) {
          throw new RunStateError(
            tenantId,
            key,
            run.status,
            `timed out waiting for signal '${name}' before it arrived; the run went on without it ` +
              "(onTimeout or a stored 408), so the signal changes nothing",
          );
        }
        if (done.existing === fingerprint) return { duplicate: true, woke: false };
        throw new IdempotencyKeyMismatchError(tenantId, key, `a different payload for signal '${name}'`);
      }
      if (!done.stored) {
        throw new RunStateError(
          tenantId,
          key,
          run.status,
          `is completed: signal '${name}' arrived after the run finished and changes nothing (its stored response is replayed)`,
        );
      }
      return { duplicate: false, woke: done.woke };
    });
  }

  async function wait(tenantId: string, key: string, opts: WaitOptions): Promise<RunResult<unknown>> {
    assertValidKey(tenantId, "tenant id");
    assertValidKey(key, "idempotency key");
    const timeoutMs = intOption("wait", "timeoutMs", opts?.timeoutMs, 0, MAX_TIMER_MS);
    if (timeoutMs === undefined) throw new InvalidOptionError("timeoutMs", "wait: timeoutMs is required");
    const deadline = performance.now() + timeoutMs;
    const watch = waiter.watch(tenantId, key);
    let pause = FIRST_PAUSE_MS;
    try {
      for (;;) {
        const row = await selectOutcome(db, tables, tenantId, key);
        if (!row || row.expired) throw new RunNotFoundError(tenantId, key);
        if (row.status === "completed") {
          return {
            status: row.response_status ?? 500,
            body: JSON.parse(row.response_body ?? "null") as JsonValue,
            replayed: true,
            outcome: row.outcome ?? "succeeded",
          } as RunResult<unknown>;
        }
        if (row.status === "parked") throw new RunParkedError(tenantId, key, row.parked_reason ?? "parked");
        const retryAfterMs =
          row.status === "in_flight"
            ? Math.max(0, row.lease_remaining_ms ?? 0)
            : row.wake_remaining_ms === null
              ? leaseMs
              : Math.max(0, row.wake_remaining_ms);
        const left = deadline - performance.now();
        if (left <= 0) throw new IdempotencyKeyInProgressError(tenantId, key, retryAfterMs);
        await watch.pause(Math.min(left, pause));
        pause = Math.min(MAX_PAUSE_MS, pause * 2);
      }
    } finally {
      watch.close();
    }
  }

  /**
   * A worker's execution of one due run: take it and run it to its next stop;
   * null when another worker or a client retry got it first.
   */
  async function executeDue(
    deployed: readonly Definition[],
    tenantId: string,
    key: string,
  ): Promise<RunResult<unknown> | null> {
    const def = deployed[0] as Definition;
    const runLease = def.options.leaseMs ?? leaseMs;
    checkHeartbeat(`workflow '${def.name}'`, heartbeatMs, runLease);
    const ownerToken = newId();
    const attributes = () => runAttributes(def.name, tenantId, key);
    return telemetry.span(`resume ${def.name}`, "internal", attributes, async (span) => {
      const taken = await takeDueRun(db, tables, { tenantId, key, ownerToken, leaseMs: runLease, fingerprint: null });
      if (!taken) return null; // another worker or a client retry got it first
      telemetry.count("claims", { "idempo.workflow": def.name, "idempo.claim.result": "resume" });
      span.set({ "idempo.claim.result": "resume" });
      try {
        const result = await resume(deployed, taken, { tenantId, key, ownerToken }, runLease, span, "due");
        span.set({ "idempo.outcome": result.outcome, "idempo.replayed": false });
        return result;
      } catch (error) {
        telemetry.log(
          "error",
          { workflow: def.name, tenantId, keyHash: keyHash(tenantId, key), error: String(error) },
          "idempo: running a due run failed; it stays at its recovery point",
        );
        throw error;
      }
    });
  }

  /** The due runs of these workflows, each executed once, in the order a worker would take them. */
  async function resumeDue(opts: ResumeDueOptions): Promise<DueReport> {
    const byName = deployedByName("resumeDue", opts?.workflows);
    for (const versions of byName.values()) remember(versions);
    const limit = intOption("resumeDue", "limit", opts.limit, 1, 10_000, 100);
    const resumed: DueReport["resumed"][number][] = [];
    const failed: DueReport["failed"][number][] = [];
    for (const due of await selectDueRuns(db, tables, [...byName.keys()], limit)) {
      const run = { tenantId: due.tenantId, key: due.key, workflow: due.workflow };
      try {
        const result = await executeDue(byName.get(due.workflow) as readonly Definition[], due.tenantId, due.key);
        if (result) resumed.push({ ...run, status: result.status, outcome: result.outcome });
      } catch (error) {
        failed.push({ ...run, error: error instanceof Error ? error : new Error(String(error)) });
      }
    }
    return { resumed, failed };
  }

  async function sweep(opts: SweepOptions = {}): Promise<number> {
    const batchSize = intOption("sweep", "batchSize", opts.batchSize, 1, 100_000, 500);
    const maxBatches = intOption("sweep", "maxBatches", opts.maxBatches, 1, 1_000_000, 100);
    const keepOutboxMs = intOption(
      "sweep",
      "outboxRetentionMs",
      opts.outboxRetentionMs,
      1,
      MAX_RETENTION_MS,
      7 * 24 * 60 * 60 * 1000,
    );
    let total = 0;
    for (let i = 0; i < maxBatches; i++) {
      const n = await sweepBatch(db, tables, batchSize);
      total += n;
      telemetry.count("sweepDeleted", { "idempo.table": "runs" }, n);
      if (n < batchSize) break;
    }
    for (let i = 0; i < maxBatches; i++) {
      if ((await sweepOutboxBatch(db, tables, batchSize, keepOutboxMs)) < batchSize) break;
    }
    return total;
  }

  const engine: Engine = {
    ...adminApi(db, tables),
    ...operatorVerbs(db, tables),
    runOnce,
    resumeStale,
    sweep,
    startRelay: (opts) => startRelay(db, tables, () => faultHookOf(engine), telemetry, opts),
    enqueue,
    signal,
    wait,
    startWorker(opts) {
      const at = "startWorker";
      const intervalMs = intOption(at, "intervalMs", opts?.intervalMs, 1, MAX_TIMER_MS, 5_000);
      const byName = deployedByName(at, opts.workflows);
      for (const versions of byName.values()) remember(versions);
      intOption(at, "limit", opts.limit, 1, 10_000, 100);
      const concurrency = intOption(at, "concurrency", opts.concurrency, 1, 1_000, 10);
      const limits = new Map<string, number>();
      const perWorkflow = opts.workflowConcurrency ?? {};
      if (typeof perWorkflow !== "object" || perWorkflow === null || Array.isArray(perWorkflow)) {
        throw new InvalidOptionError(
          "workflowConcurrency",
          `${at}: workflowConcurrency must be an object of limits by workflow name, such as { checkout: 5 }`,
        );
      }
      for (const [name, limit] of Object.entries(perWorkflow)) {
        if (!byName.has(name)) {
          throw new InvalidOptionError(
            "workflowConcurrency",
            `${at}: workflowConcurrency names '${name}', which is not in workflows`,
          );
        }
        limits.set(name, intOption(at, `workflowConcurrency.${name}`, limit, 1, 1_000, 1));
      }
      const onError = opts.onError ?? (() => {});
      const maintenance = startLoop(
        intervalMs,
        async () => {
          const report = await resumeStale(opts);
          for (const f of report.failed) onError(f.error);
          if (opts.sweep !== false) await sweep();
        },
        onError,
      );
      const due = startDueLoop(
        { workflows: [...byName.keys()], concurrency, limits, pollMs: intervalMs, listen: opts.listen },
        {
          select: (workflows, limit) => selectDueRuns(db, tables, workflows, limit),
          nextWakeInMs: (workflows) => msUntilNextWake(db, tables, workflows),
          execute: async (r) => {
            await executeDue(byName.get(r.workflow) as readonly Definition[], r.tenantId, r.key);
          },
          onError,
        },
      );
      return {
        async stop() {
          await Promise.all([maintenance.stop(), due.stop()]);
        },
      };
    },
    migrate: () => applyMigrations(db, tables),
    async inspect(tenantId, key) {
      assertValidKey(tenantId, "tenant id");
      assertValidKey(key, "idempotency key");
      const row = await selectRecord(db as Executor, tables, tenantId, key);
      if (!row) return null;
      return toRecord(row, await selectHistory(db, tables, tenantId, key, row.run_id));
    },
    async listKeys(opts = {}) {
      if (opts.tenantId !== undefined) assertValidKey(opts.tenantId, "tenant id");
      if (opts.workflow !== undefined) assertValidKey(opts.workflow, "workflow name");
      if (opts.status !== undefined && !["in_flight", "completed", "parked", "suspended"].includes(opts.status)) {
        throw new InputValidationError([
          { path: "status", message: "must be 'in_flight', 'completed', 'parked' or 'suspended'" },
        ]);
      }
      const limit = opts.limit ?? 50;
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
        throw new InputValidationError([{ path: "limit", message: "must be an integer from 1 to 1000" }]);
      }
      const rows = await selectRecords(db, tables, {
        tenantId: opts.tenantId,
        workflow: opts.workflow,
        status: opts.status,
        stuck: opts.stuck === true,
        limit,
        after: opts.cursor === undefined ? undefined : decodeCursor(opts.cursor),
      });
      const items = rows.map((r) => toRecord(r, undefined));
      const lastRow = rows[limit - 1];
      return { items, nextCursor: rows.length === limit && lastRow ? encodeCursor(lastRow) : null };
    },
  };
  attachDueResumer(engine, resumeDue);
  return Object.freeze(engine);
}
