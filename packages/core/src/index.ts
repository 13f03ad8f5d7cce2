export type {
  DataLayer,
  PhaseTx,
  SqlSession,
  TransactionOptions,
  TxOf,
  WithTx,
} from "./database/data-layer.js";
export { type DrizzleDatabase, type DrizzleTx, fromDrizzle } from "./database/drizzle.js";
export { fromKysely } from "./database/kysely.js";
export { fromNodePostgres, type PgClient, type PgPool, type PgPoolClient } from "./database/node-postgres.js";
export { DatabaseUnavailableError, ListenConnectionLostError } from "./database-errors.js";
export {
  AttemptTimeoutError,
  IdempoError,
  IdempotencyKeyExpiredError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  type InputIssue,
  InputValidationError,
  InvalidIdempotencyKeyError,
  InvalidOptionError,
  LeaseLostError,
  PayloadTooLargeError,
  PhaseConflictError,
  RunNotFoundError,
  RunParkedError,
  RunStateError,
  UnstorableValueError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "./errors.js";
export type { JsonObject, JsonValue } from "./json/json-value.js";
export { deriveChildKey, deriveStepKey } from "./keys/derived-key.js";
export { MAX_KEY_BYTES } from "./keys/key-validation.js";
export { type PreparedStatementsOptions, withPreparedStatements } from "./prepared-statements.js";
export type { EnqueueRequest, EnqueueResult } from "./runtime/admission/enqueue.js";
export type { RunOnceRequest } from "./runtime/admission/run-once.js";
export type { ListenCheckOptions } from "./runtime/background/listen-options.js";
export type {
  ListenApi,
  ListenClient,
  ListenPool,
  Notification,
  NotificationSource,
} from "./runtime/background/notifications.js";
export type {
  DeliveryContext,
  DeliveryHandler,
  OutboxMessage,
  Relay,
  RelayOptions,
} from "./runtime/background/relay.js";
export type { ResumeReport, ResumeStaleOptions } from "./runtime/background/resume-stale.js";
export type { SweepOptions } from "./runtime/background/sweep.js";
export type { Worker, WorkerOptions } from "./runtime/background/worker.js";
export { createEngine, type Engine } from "./runtime/engine.js";
export type { EngineOptions } from "./runtime/engine-options.js";
export type { RunResult } from "./runtime/execution/run-result.js";
export { type StepFailure, stepFailureOf } from "./runtime/execution/step-failure.js";
export type { AdminApi, ListOutboxOptions, OutboxEntry, WorkflowStats } from "./runtime/operator/admin-api.js";
export type {
  CancelOptions,
  ForgetOptions,
  OperatorVerbs,
  RetryFromOptions,
} from "./runtime/operator/operator-verbs.js";
export type {
  DurationStats,
  ItemDurationStats,
  Overview,
  OverviewApi,
  OverviewOptions,
  OverviewWindow,
} from "./runtime/operator/overview.js";
export type {
  ChildLink,
  HistoryEntry,
  KeyPage,
  ListKeysOptions,
  ParentLink,
  RunOutcome,
  RunRecord,
  RunStatus,
  StepTry,
  TombstoneRecord,
  WaitingFor,
} from "./runtime/operator/records.js";
export type { RateLimitOptions } from "./runtime/rate-limit-options.js";
export type { CatchUp, ScheduleOptions, ScheduleTick } from "./runtime/schedules/schedule-options.js";
export type { ScheduleRecord } from "./runtime/schedules/schedule-record.js";
export type {
  ListScheduleTicksOptions,
  PastTick,
  ScheduleTicks,
  TickRun,
} from "./runtime/schedules/schedule-ticks.js";
export type { SignalOptions } from "./runtime/signal-delivery/deliver-signal.js";
export type { SignalResult } from "./runtime/signal-delivery/signal-acceptance.js";
export type { WaitOptions } from "./runtime/signal-delivery/wait-for-completion.js";
export type { LogFields, Logger } from "./telemetry/logger.js";
export type { WorkflowBuilder } from "./workflow/builder.js";
export type {
  EnqueueOptions,
  Outbox,
  PhaseContext,
  ReconcileContext,
  ResponseSpec,
  RunControl,
  RunInfo,
  StepContext,
  TimeoutContext,
} from "./workflow/context.js";
export type {
  ChildOptions,
  ChildResult,
  ConcurrencyInfo,
  ConcurrencyOptions,
  MapOptions,
  ParallelOptions,
  SleepDuration,
  StateUpdate,
  StepOptions,
  UnknownErrorPolicy,
  WaitForOptions,
  Workflow,
  WorkflowOptions,
} from "./workflow/definition.js";
export type { BranchResult, ParallelBuilder } from "./workflow/parallel-builder.js";
export { workflow } from "./workflow/workflow.js";
