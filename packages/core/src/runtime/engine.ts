import type { Kysely } from "kysely";
import {
  DatabaseUnavailableError,
  IdempoError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidOptionError,
  RunParkedError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "../errors.js";
import { newId } from "../ids.js";
import { requestFingerprint } from "../json/fingerprint.js";
import type { JsonObject, JsonValue } from "../json/json-value.js";
import { assertValidKey } from "../keys/key-validation.js";
import type { NewRun } from "../store/claim.js";
import { claimNewKey, reclaimExpiredKey, takeOverExpiredLease } from "../store/claim.js";
import { selectStaleRuns, sweepBatch, sweepOutboxBatch } from "../store/maintenance.js";
import { applyMigrations } from "../store/migrate.js";
import { selectHistory, selectRecord, selectRecords } from "../store/operations.js";
import type { Executor, TakenRun } from "../store/run-store.js";
import { tablesIn } from "../store/run-store.js";
import type { Logger } from "../telemetry/logger.js";
import { SILENT } from "../telemetry/logger.js";
import type { ClaimResult, SpanScope } from "../telemetry/telemetry.js";
import { keyHash, Telemetry } from "../telemetry/telemetry.js";
import type { Definition, Workflow } from "../workflow/definition.js";
import type { AdminApi } from "./admin-api.js";
import { adminApi } from "./admin-api.js";
import { isConnectionLoss } from "./db-errors.js";
import type { ExecutorDeps } from "./executor.js";
import { execute } from "./executor.js";
import { faultHookOf, heartbeatSilenced } from "./hooks.js";
import type { OperatorVerbs } from "./operator-verbs.js";
import { operatorVerbs } from "./operator-verbs.js";
import { checkHeartbeat, intOption, MAX_TIMER_MS } from "./option-checks.js";
import type { KeyPage, ListKeysOptions, RunRecord } from "./records.js";
import { decodeCursor, encodeCursor, toRecord } from "./records.js";
import type { Relay, RelayOptions } from "./relay.js";
import { startRelay } from "./relay.js";
import { checkResumable } from "./resumable.js";
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
}

/** The arguments of one `runOnce` call. */
export interface RunOnceRequest<In> {
  /** The scope the key belongs to; every lookup includes it. Same rules as the key. */
  tenantId: string;
  /** The client's idempotency key: 1-255 UTF-8 bytes, no control characters, case-sensitive, never trimmed. */
  key: string;
  /** The request; JSON values only (a Date becomes its ISO string). Checked by the workflow's schema. */
  input: In;
}

/** An idempo engine bound to one database; see {@link createEngine}. */
export interface Engine extends AdminApi, OperatorVerbs {
  /**
   * Run `workflow` once for `(tenantId, key)`: claim the key and execute, or
   * replay the stored response, or take over an expired lease and resume
   * after the last recovery point.
   *
   * @returns the response, with `replayed: true` when it came from the stored record.
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) input not JSON or rejected by the schema, before any claim.
   * @throws IdempotencyKeyInProgressError (409) another attempt holds a valid lease; see `retryAfterMs`.
   * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
   * @throws LeaseLostError (409) this attempt was taken over while it worked.
   * @throws WorkflowDefinitionError (500) the stored recovery point is not in this definition.
   * @throws RunParkedError (500) the run is parked, or this takeover would exceed the workflow's `maxAttempts` and parked it.
   * Any error thrown by workflow code is rethrown; the run stays at its recovery point.
   */
  runOnce<In, B>(workflow: Workflow<In, B>, request: RunOnceRequest<In>): Promise<RunResult<B>>;
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
   * Run `resumeStale` and `sweep` in the background every `intervalMs`.
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
  /** The workflow definitions this process can run; runs of other workflows are left alone. */
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
  /** Pause between rounds in ms (Default: 5 000). */
  intervalMs?: number;
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

/** The definitions `resumeStale` may run, by name; anything else in the list is a usage error. */
function workflowsByName(where: string, workflows: unknown): Map<string, Definition> {
  if (!Array.isArray(workflows) || workflows.length === 0) {
    throw new InvalidOptionError("workflows", `${where}: workflows must be a non-empty array of workflows`);
  }
  const byName = new Map<string, Definition>();
  workflows.forEach((w: { definition?: Definition } | undefined, i) => {
    if (!w?.definition?.items) {
      throw new InvalidOptionError(
        "workflows",
        `${where}: workflows[${i}] is not a workflow built with workflow(...).respond(...)`,
      );
    }
    byName.set(w.definition.name, w.definition);
  });
  return byName;
}

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
  const db = options.db as unknown as ExecutorDeps["db"];
  const tables = tablesIn(options.schema ?? "idempo");
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
  const deps = (): ExecutorDeps => ({
    db,
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
    const attributes = runAttributes(name, request?.tenantId, request?.key);
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

    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      const fresh: NewRun = {
        tenantId,
        key,
        runId: newId(),
        workflow: def.name,
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
      if (claim.kind === "raced") continue;
      if (claim.kind === "claimed") return start();
      const found = claim.run;
      if (found.status === "completed" && found.expired) {
        // Past retention the key counts as absent, swept or not.
        if (await reclaimExpiredKey(db, tables, fresh)) return start();
        continue;
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
        claimed("in_progress");
        throw new IdempotencyKeyInProgressError(tenantId, key, runLease);
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
      if (found.leaseRemainingMs > 0) {
        claimed("in_progress");
        throw new IdempotencyKeyInProgressError(tenantId, key, found.leaseRemainingMs);
      }
      const ownerToken = newId();
      const taken = await takeOverExpiredLease(db, tables, {
        tenantId,
        key,
        ownerToken,
        leaseMs: runLease,
        fingerprint,
        maxAttempts: def.options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      });
      if (!taken) continue;
      if (taken.kind === "parked") {
        claimed("parked");
        parkedByTakeover(def.name, tenantId, key, taken.reason);
        throw new RunParkedError(tenantId, key, taken.reason);
      }
      claimed("takeover");
      return resume(def, taken.run, { tenantId, key, ownerToken }, runLease, span) as Promise<RunResult<B>>;
    }
    claimed("in_progress");
    throw new IdempotencyKeyInProgressError(tenantId, key, 0);
  }

  async function resume(
    def: Definition,
    taken: TakenRun,
    own: { tenantId: string; key: string; ownerToken: string },
    runLease: number,
    span: SpanScope,
  ): Promise<RunResult<unknown>> {
    span.set({ "idempo.attempt": taken.attempt });
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
    checkResumable(def, taken);
    return execute(deps(), {
      def,
      own: { ...own, runId: taken.runId },
      attempt: taken.attempt,
      input: await reparseInput(def, JSON.parse(taken.input) as JsonValue, taken.parsedInputHash),
      state: deepFreeze(JSON.parse(taken.state) as JsonObject),
      recoveryPoint: taken.recoveryPoint,
      leaseMs: runLease,
      span,
      attemptTimeoutMs: boundOf(def),
    });
  }

  async function resumeStale(opts: ResumeStaleOptions): Promise<ResumeReport> {
    const byName = workflowsByName("resumeStale", opts?.workflows);
    const limit = intOption("resumeStale", "limit", opts.limit, 1, 10_000, 100);
    const resumed: ResumeReport["resumed"][number][] = [];
    const failed: ResumeReport["failed"][number][] = [];
    const parked: ResumeReport["parked"][number][] = [];
    for (const stale of await selectStaleRuns(db, tables, [...byName.keys()], limit)) {
      const def = byName.get(stale.workflow) as Definition;
      const runLease = def.options.leaseMs ?? leaseMs;
      const ownerToken = newId();
      try {
        checkHeartbeat(`workflow '${def.name}'`, heartbeatMs, runLease);
        const res = await telemetry.span(
          `resume ${stale.workflow}`,
          "internal",
          runAttributes(stale.workflow, stale.tenantId, stale.key),
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
              def,
              taken.run,
              { tenantId: stale.tenantId, key: stale.key, ownerToken },
              runLease,
              span,
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
    startWorker(opts) {
      const intervalMs = intOption("startWorker", "intervalMs", opts?.intervalMs, 1, MAX_TIMER_MS, 5_000);
      workflowsByName("startWorker", opts.workflows);
      intOption("startWorker", "limit", opts.limit, 1, 10_000, 100);
      const onError = opts.onError ?? (() => {});
      return startLoop(
        intervalMs,
        async () => {
          const report = await resumeStale(opts);
          for (const f of report.failed) onError(f.error);
          if (opts.sweep !== false) await sweep();
        },
        onError,
      );
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
  return Object.freeze(engine);
}
