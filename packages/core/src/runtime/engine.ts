/**
 * The engine: the documented `Engine` interface and `createEngine`, a thin
 * wiring of named services over one shared context (see `engine-context.ts`):
 * admission (`runOnce`, `enqueue`), signal delivery (`signal`, `wait`),
 * background work (`resumeStale`, `sweep`, `startWorker`, `startRelay`),
 * schedules (`schedule`, `unschedule`, `listSchedules`, pause and resume,
 * fired by the workers) and the operator verbs and reads.
 */
import { applyMigrations } from "../store/migrate.js";
import type { Workflow } from "../workflow/definition.js";
import type { EnqueueRequest, EnqueueResult } from "./admission/enqueue.js";
import { enqueue } from "./admission/enqueue.js";
import type { RunOnceRequest } from "./admission/run-once.js";
import { runOnce } from "./admission/run-once.js";
import type { Relay, RelayOptions } from "./background/relay.js";
import { startRelay } from "./background/relay.js";
import { resumeDueRuns } from "./background/resume-due.js";
import type { ResumeReport, ResumeStaleOptions } from "./background/resume-stale.js";
import { resumeStale } from "./background/resume-stale.js";
import type { SweepOptions } from "./background/sweep.js";
import { sweep } from "./background/sweep.js";
import type { Worker, WorkerOptions } from "./background/worker.js";
import { startWorker } from "./background/worker.js";
import { createContext } from "./engine-context.js";
import { engineTransaction } from "./engine-db.js";
import { attachInternals } from "./engine-internals.js";
import type { EngineOptions } from "./engine-options.js";
import { translateEntryErrors, withEntryErrors } from "./entry-errors.js";
import { faultHookOf } from "./execution/hooks.js";
import type { RunResult } from "./execution/run-result.js";
import type { AdminApi } from "./operator/admin-api.js";
import { adminApi } from "./operator/admin-api.js";
import { inspect, listKeys } from "./operator/inspection.js";
import type { OperatorVerbs } from "./operator/operator-verbs.js";
import { operatorVerbs } from "./operator/operator-verbs.js";
import type { OverviewApi } from "./operator/overview.js";
import { overviewApi } from "./operator/overview.js";
import type { KeyPage, ListKeysOptions, RunRecord, TombstoneRecord } from "./operator/records.js";
import { fireDueSchedules } from "./schedules/fire-ticks.js";
import { newestByName, scheduleFiring } from "./schedules/schedule-loop.js";
import type { ScheduleOptions } from "./schedules/schedule-options.js";
import type { ScheduleRecord } from "./schedules/schedule-record.js";
import { ScheduleRegistry } from "./schedules/schedule-registry.js";
import { scheduleVerbs } from "./schedules/schedule-service.js";
import type { ListScheduleTicksOptions, ScheduleTicks } from "./schedules/schedule-ticks.js";
import { listScheduleTicks } from "./schedules/schedule-ticks.js";
import { cronOf } from "./schedules/ticks.js";
import type { SignalOptions } from "./signal-delivery/deliver-signal.js";
import { signalRun } from "./signal-delivery/deliver-signal.js";
import type { SignalResult } from "./signal-delivery/signal-acceptance.js";
import type { WaitOptions } from "./signal-delivery/wait-for-completion.js";
import { waitForCompletion } from "./signal-delivery/wait-for-completion.js";

/** An idempo engine bound to one database; see {@link createEngine}. */
export interface Engine extends AdminApi, OperatorVerbs, OverviewApi {
  /**
   * Run `workflow` once for `(tenantId, key)`: claim the key and execute, or
   * replay the stored response, or take over an expired lease and resume
   * after the last recovery point. New runs take `workflow`'s version; a
   * stored run resumes under its own version when `workflow` replaces it
   * (see `WorkflowBuilder.version`).
   *
   * @example
   * ```ts
   * const res = await engine.runOnce(checkout, {
   *   tenantId: 'acme',
   *   key: 'order-7f3a', // the client's Idempotency-Key
   *   input: { cartId: 'cart-1', amountCents: 1999 },
   *   waitInFlightMs: 5_000, // a concurrent duplicate waits for the first answer
   * })
   * if (res.outcome === 'succeeded') console.log(res.status, res.body.orderId, res.replayed)
   * ```
   * @returns the response, with `replayed: true` when it came from the stored record.
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) input not JSON or rejected by the schema, before any claim.
   * @throws PayloadTooLargeError (413) the input is over `maxPayloadBytes`, before any claim; a value the run produces over it parks the run.
   * @throws InvalidOptionError (500) the request holds an unknown key or a value of the wrong type, before any claim.
   * @throws WorkflowUsageError (500) the schema was never migrated: run `engine.migrate()`.
   * @throws IdempotencyKeyInProgressError (409) another attempt holds a valid lease; see `retryAfterMs`.
   * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
   * @throws IdempotencyKeyExpiredError (410) the key's run completed and its record expired; its tombstone refuses the key until `tombstoneUntil` (workflow option `tombstoneMs`), then it runs again as new.
   * @throws LeaseLostError (409) this attempt was taken over while it worked.
   * @throws WorkflowDefinitionError (500) no deployed version (`workflow` and those it replaces) can finish the stored run.
   * @throws RunParkedError (500) the run is parked, or this takeover would exceed the workflow's `maxAttempts` and parked it.
   * Any error thrown by workflow code is rethrown; the run stays at its recovery point.
   */
  runOnce<In, B>(workflow: Workflow<In, B>, request: RunOnceRequest<In>): Promise<RunResult<B>>;
  /**
   * Create a run inside the caller's own transaction: it exists
   * exactly when that transaction commits (and a NOTIFY sent in it wakes
   * the workers then). The run is `suspended` and due at once with attempt
   * 0 until a worker (`startWorker`) or a `runOnce` with the same key and
   * payload takes it. Same claim rules as `runOnce`: the same key with the
   * same payload is a no-op (`created: false`), another payload or
   * workflow is a mismatch; a completed record past retention refuses the
   * key while its tombstone lasts, and counts as absent after it.
   *
   * @example
   * ```ts
   * await db.transaction().execute(async (tx) => {
   *   await tx.insertInto('orders').values({ id: 'o-1', cart_id: 'cart-1', amount_cents: 1999 }).execute()
   *   // The run exists exactly when the order does; a worker runs it.
   *   await engine.enqueue(tx, checkout, { tenantId: 'acme', key: 'order-o-1', input: { cartId: 'cart-1', amountCents: 1999 } })
   * })
   * ```
   * @param tx the caller's transaction (or the database itself, for a run created on its own).
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InputValidationError (400) input not JSON or rejected by the schema, before any SQL.
   * @throws PayloadTooLargeError (413) the input is over `maxPayloadBytes`, before any SQL.
   * @throws IdempotencyKeyMismatchError (422) the key was used with another payload or workflow.
   * @throws IdempotencyKeyExpiredError (410) the key's run completed and its record expired, and its tombstone lasts (as for `runOnce`).
   */
  enqueue<In>(tx: object, workflow: Workflow<In, unknown>, request: EnqueueRequest<In>): Promise<EnqueueResult>;
  /**
   * Deliver a signal to a run's `.waitFor(name)` item: the JSON `payload`
   * is kept (also when the run has not reached the item yet) and merged
   * into state as `{ [name]: payload }` when it does; a run suspended on
   * the item becomes due at once. The same name with the same canonical
   * payload again is a no-op (`duplicate: true`), also after the run completed.
   * Any signal for a run whose record expired is acknowledged with
   * `expired: true` while its tombstone lasts, swept or not.
   *
   * The payload is checked against the wait's schema in the version the
   * run started under before anything is stored, so this engine must have
   * that version (given in `createEngine({ workflows })`, directly or
   * through `.replaces`, or run by it); without it nothing is stored. A
   * stored signal that fails the schema (written to the table unchecked)
   * gives way to a valid one, with a `discarded` entry in the run's history.
   *
   * With `{ tx }` the signal is written in the caller's transaction and
   * commits or rolls back with it; workers are woken on its commit. That is
   * also the only way to signal from inside a transaction on PGlite (one
   * connection): without `tx` the call would wait for that transaction.
   *
   * @example
   * await db.transaction().execute(async (tx) => {
   *   await tx.insertInto("settlements").values({ transfer_id: "t1" }).execute();
   *   await engine.signal("acme", "transfer-t1", "settled", { reference: "BANK-81" }, { tx });
   * });
   *
   * @example
   * ```ts
   * // In the payment provider's webhook: wake the run waiting in `.waitFor('challenge')`.
   * const { duplicate, woke } = await engine.signal('acme', 'order-7f3a', 'challenge', { approved: true })
   * ```
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant, before any SQL.
   * @throws InvalidOptionError (500) an unknown option, or a `tx` that is not a transaction of the engine's data layer, before any SQL.
   * @throws InputValidationError (400) the payload is not JSON or fails the wait's schema, or the run's workflow waits for no such name.
   * @throws IdempotencyKeyMismatchError (422) a different payload was already delivered under this name.
   * @throws RunStateError (409) the run is completed and this signal is new, or the wait timed out before it
   *   arrived, or this engine lacks the workflow version the run started under (the message names it).
   * @throws RunNotFoundError (404) the key has no record, nor a tombstone in force.
   * @throws PayloadTooLargeError (413) the payload is over `maxPayloadBytes`: nothing is stored.
   */
  signal<DB = unknown>(
    tenantId: string,
    key: string,
    name: string,
    payload: unknown,
    options?: SignalOptions<DB>,
  ): Promise<SignalResult>;
  /**
   * Wait for a run to complete and return its stored response
   * (`replayed: true`), without taking part in it. Woken by NOTIFY when the
   * engine has a `listen` connection, by polling (the guarantee) otherwise;
   * no pooled connection is held between polls. A poll that loses its
   * connection (a failover) is tried again until the timeout.
   *
   * @example
   * ```ts
   * const res = await engine.wait('acme', 'order-7f3a', { timeoutMs: 30_000 })
   * console.log(res.status, res.body) // the stored response, res.replayed === true
   * ```
   * @throws IdempotencyKeyInProgressError (409) still not completed at the timeout; `retryAfterMs` as for `runOnce`.
   * @throws DatabaseUnavailableError (503) the database could not be read at the timeout.
   * @throws RunParkedError (500) the run is parked: it will not complete on its own.
   * @throws IdempotencyKeyExpiredError (410) the run completed and its record expired: its response is gone.
   * @throws RunNotFoundError (404) the key has no record, nor a tombstone in force.
   * @throws InvalidIdempotencyKeyError (400) bad key or tenant.
   */
  wait(tenantId: string, key: string, options: WaitOptions): Promise<RunResult<unknown>>;
  /** Apply pending SQL migrations under an advisory lock; returns the names applied. Safe to call concurrently. */
  migrate(): Promise<string[]>;
  /**
   * The record of one key with its history; its tombstone (`status:
   * 'expired'`) once the record expired and was swept, while the tombstone
   * lasts; `null` when absent. Lease time uses the DB clock.
   */
  inspect(tenantId: string, key: string): Promise<RunRecord | TombstoneRecord | null>;
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
   * never in-flight records), leaving a tombstone for each one whose
   * `tombstoneMs` has not passed, and delete tombstones past their time, in
   * batches of the same size. Expired records already answer as their
   * tombstones, so sweeping only reclaims space. Also deletes outbox
   * messages delivered longer ago than `outboxRetentionMs` (pending and
   * dead ones stay).
   * @returns how many key records were deleted (tombstones not counted).
   */
  sweep(options?: SweepOptions): Promise<number>;
  /**
   * Execute background runs: claim due suspended runs of the given
   * workflows (enqueued, woken sleeps, signalled or timed-out waits) with
   * `FOR UPDATE SKIP LOCKED`, fairly across tenants and within per-workflow
   * limits, and run each from its recovery point; also run `resumeStale`
   * and `sweep` every `intervalMs`, and fire due schedule ticks (see
   * `schedule`). Any number of workers (in any number of processes) may run
   * at once: each run is executed by one of them, each tick starts one run.
   * Before its first round a worker registers the versions of its workflows
   * in the database (table `workflow_versions`), so that programs in other
   * languages can enqueue runs of them through SQL (docs/sql-api.md).
   * `await worker.stop()` waits for the runs it is finishing.
   * @example
   * ```ts
   * const worker = engine.startWorker({ workflows: [checkout], concurrency: 8 })
   * process.once('SIGTERM', () => void worker.stop()) // finishes the runs it holds
   * ```
   */
  startWorker(options: WorkerOptions): Worker;
  /**
   * Deliver outbox messages at least once: claim due messages (SKIP LOCKED),
   * call the topic's handler outside any transaction with a stable
   * `deliveryKey`, mark delivered; back off and finally dead-letter on failure.
   * @example
   * ```ts
   * const relay = engine.startRelay({
   *   handlers: {
   *     'order.placed': async (message, { deliveryKey, signal }) => {
   *       const headers = { 'content-type': 'application/json', 'idempotency-key': deliveryKey }
   *       const res = await fetch('https://hooks.example.com/orders', { method: 'POST', headers, body: JSON.stringify(message.payload), signal })
   *       if (!res.ok) throw new Error(`receiver answered ${res.status}`) // retried with backoff
   *     },
   *   },
   * })
   * ```
   */
  startRelay(options: RelayOptions): Relay;
  /**
   * Create or change a durable schedule: from its next tick on, every tick
   * of `cron` (read in `timezone`) starts one run of `workflow` for
   * `tenantId`, however many workers run; the run's key is derived from the
   * name and the tick's time (`schedule:<name>:<ISO time>`), so two workers
   * that both fire a tick make one run. The schedule is a database row;
   * workers (`startWorker`) fire it. Calling `schedule` again with the same
   * cron and zone (as every process does at start-up) keeps its place in
   * time; a new cron or zone takes effect from its own next tick; other
   * changes from the next tick fired. A paused schedule stays paused.
   *
   * The `input` function stays in this process: only workers of engines
   * that called `schedule` with it fire such a schedule. Without one, the
   * input is `{ schedule, at }` and any worker running `workflow` fires it.
   *
   * @example
   * ```ts
   * await engine.schedule('nightly-invoices', {
   *   cron: '0 2 * * *',
   *   timezone: 'Europe/Berlin',
   *   workflow: checkout,
   *   tenantId: 'acme',
   *   input: (tick) => ({ cartId: `nightly-${tick.at.toISOString().slice(0, 10)}`, amountCents: 100 }),
   *   catchUp: 'latest', // after an outage, one run for the ticks it missed
   * })
   * const worker = engine.startWorker({ workflows: [checkout] }) // fires the ticks and runs them
   * ```
   * @returns the stored schedule, with its next tick.
   * @throws InvalidOptionError (500) a bad name (1-128 letters, digits, `.`, `_`, `-`), an unknown option, a cron
   *   expression that does not parse or never ticks, an unknown time zone, a value that is not a workflow, a bad
   *   `catchUp` or `graceMs`; nothing is written.
   * @throws InvalidIdempotencyKeyError (400) a bad tenant id.
   * @throws InputValidationError (400) the input of the first tick fails the workflow's schema or is not JSON.
   */
  schedule<In>(name: string, options: ScheduleOptions<In>): Promise<ScheduleRecord>;
  /**
   * Delete a schedule: no tick after this starts a run (runs already
   * started go on). Returns false when there was no such schedule.
   * @example
   * ```ts
   * const removed = await engine.unschedule('nightly-invoices')
   * ```
   * @throws InvalidOptionError (500) a name that no schedule can have.
   */
  unschedule(name: string): Promise<boolean>;
  /**
   * Every stored schedule by name, with its next tick and the last one
   * fired (database clock), whichever process created it.
   * @example
   * ```ts
   * for (const s of await engine.listSchedules()) console.log(s.name, s.cron, s.nextTickAt?.toISOString())
   * ```
   */
  listSchedules(): Promise<ScheduleRecord[]>;
  /**
   * Stop a schedule from firing until `resumeSchedule`; `schedule` called
   * again keeps it paused. Returns the schedule, or null when there is none
   * by that name.
   * @example
   * ```ts
   * await engine.pauseSchedule('nightly-invoices')
   * ```
   * @throws InvalidOptionError (500) a name that no schedule can have.
   */
  pauseSchedule(name: string): Promise<ScheduleRecord | null>;
  /**
   * Let a paused schedule fire again, from its first tick after now: the
   * ticks of the pause are skipped, not caught up. A schedule that is not
   * paused is returned as it is; null when there is none by that name.
   * @example
   * ```ts
   * const s = await engine.resumeSchedule('nightly-invoices')
   * console.log(s?.nextTickAt)
   * ```
   * @throws InvalidOptionError (500) a name that no schedule can have.
   */
  resumeSchedule(name: string): Promise<ScheduleRecord | null>;
  /**
   * Every stored schedule by name with its next ticks (from `nextTickAt`,
   * computed from the cron expression as the workers fire them; none while
   * paused) and its last ticks, newest first, each with the run it started
   * as that run stands now (`run: null` for a tick that started none:
   * missed and not caught up, paused, or its input refused). The runs are
   * found by their keys, one primary-key probe each.
   * @example
   * ```ts
   * for (const { schedule, next, last } of await engine.listScheduleTicks({ next: 3, last: 5 })) {
   *   console.log(schedule.name, next.map((d) => d.toISOString()), last.map((t) => t.run?.status ?? 'no run'))
   * }
   * ```
   * @throws InvalidOptionError (500) an unknown option, or `next` outside 0-1000 or `last` outside 0-100.
   */
  listScheduleTicks(options?: ListScheduleTicksOptions): Promise<ScheduleTicks[]>;
}

/**
 * Create an engine on the application's data layer: its Kysely instance as
 * it is, or `fromDrizzle(db)`, `fromNodePostgres(pool)` (see `EngineOptions.db`).
 *
 * @example
 * ```ts
 * const engine = createEngine({ db, leaseMs: 30_000 })
 * await engine.migrate()
 * const res = await engine.runOnce(checkout, { tenantId: 'acme', key: 'k-123', input: { cartId: 'c-1', amountCents: 500 } })
 * ```
 *
 * @throws InvalidOptionError when an option is unknown (naming the known ones), of the wrong type, or out of range.
 * @throws WorkflowDefinitionError when the schema name is not a plain SQL identifier.
 */
export function createEngine<DB>(options: EngineOptions<DB>): Engine {
  const ctx = createContext(options, () => engine);
  const { db, tables } = ctx;
  const schedules = new ScheduleRegistry();
  const entryPoints: Omit<Engine, "runOnce" | "startRelay" | "startWorker" | "migrate"> = {
    ...adminApi(db, tables),
    ...overviewApi((body) => engineTransaction(ctx.layer, body), tables),
    ...operatorVerbs(db, tables, ctx.maxPayloadBytes),
    resumeStale: (opts) => resumeStale(ctx, opts),
    sweep: (opts) => sweep(ctx, opts),
    enqueue: (tx, wf, request) => enqueue(ctx, tx, wf, request),
    signal: (tenantId, key, name, payload, options) =>
      signalRun(ctx, tenantId, key, name, payload, options as SignalOptions<unknown> | undefined),
    wait: (tenantId, key, opts) => waitForCompletion(ctx, tenantId, key, opts),
    inspect: (tenantId, key) => inspect(db, tables, tenantId, key),
    listKeys: (opts) => listKeys(db, tables, opts),
    ...scheduleVerbs(ctx, schedules),
    listScheduleTicks: (opts) => listScheduleTicks(db, tables, opts),
  };
  const engine: Engine = {
    // Every entry point names engine.migrate() on a schema that was never migrated, as runOnce does.
    ...withEntryErrors(tables.schema, entryPoints),
    runOnce: (wf, request) => runOnce(ctx, wf, request),
    startRelay: (opts) => startRelay(db, tables, () => faultHookOf(engine), ctx.telemetry, opts),
    startWorker: (opts) => startWorker(ctx, opts, scheduleFiring(ctx, schedules, opts)),
    migrate: () => applyMigrations((body) => engineTransaction(ctx.layer, body), tables),
  };
  attachInternals(engine, {
    resumeDue: (opts) => translateEntryErrors(resumeDueRuns(ctx, opts), tables.schema, "resumeDue"),
    clock: {
      handle: (options.db ?? engine) as object,
      db,
      inTransaction: (body) => engineTransaction(ctx.layer, body),
      schema: tables.schema,
      fireSchedules: (workflows, onError) =>
        fireDueSchedules(ctx, { registry: schedules, workflows: newestByName(workflows) }, onError),
      nextTick: (cron, timezone, after) => cronOf("the test clock", cron, timezone).nextRun(after),
    },
  });
  return Object.freeze(engine);
}
