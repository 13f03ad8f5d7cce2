export type { InputIssue } from "./errors.js";
export {
  AttemptTimeoutError,
  DatabaseUnavailableError,
  IdempoError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyMismatchError,
  InputValidationError,
  InvalidIdempotencyKeyError,
  InvalidOptionError,
  LeaseLostError,
  PhaseConflictError,
  RunNotFoundError,
  RunParkedError,
  RunStateError,
  UnstorableValueError,
  WorkflowDefinitionError,
  WorkflowUsageError,
} from "./errors.js";
export type { JsonObject, JsonValue } from "./json/json-value.js";
export { deriveStepKey } from "./keys/derived-key.js";
export { MAX_KEY_BYTES } from "./keys/key-validation.js";
export type { PreparedStatementsOptions } from "./prepared-statements.js";
export { withPreparedStatements } from "./prepared-statements.js";
export type { AdminApi, ListOutboxOptions, OutboxEntry, WorkflowStats } from "./runtime/admin-api.js";
export type {
  Engine,
  EngineOptions,
  EnqueueRequest,
  EnqueueResult,
  ResumeReport,
  ResumeStaleOptions,
  RunOnceRequest,
  SignalResult,
  SweepOptions,
  WaitOptions,
  WorkerOptions,
} from "./runtime/engine.js";
export { createEngine } from "./runtime/engine.js";
export type { NotificationSource } from "./runtime/notifications.js";
export type { CancelOptions, ForgetOptions, OperatorVerbs } from "./runtime/operator-verbs.js";
export type {
  HistoryEntry,
  KeyPage,
  ListKeysOptions,
  RunOutcome,
  RunRecord,
  RunStatus,
  WaitingFor,
} from "./runtime/records.js";
export type { DeliveryContext, DeliveryHandler, OutboxMessage, Relay, RelayOptions } from "./runtime/relay.js";
export type { RunResult } from "./runtime/run-result.js";
export type { StepFailure } from "./runtime/step-failure.js";
export { stepFailureOf } from "./runtime/step-failure.js";
export type { Worker } from "./runtime/worker.js";
export type { LogFields, Logger } from "./telemetry/logger.js";
export type { StateUpdate, WorkflowBuilder } from "./workflow/builder.js";
export { workflow } from "./workflow/builder.js";
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
  SleepDuration,
  StepOptions,
  UnknownErrorPolicy,
  WaitForOptions,
  Workflow,
  WorkflowOptions,
} from "./workflow/definition.js";
