/**
 * Every error idempo raises is an {@link IdempoError}: a stable string `code`
 * for programs, an `httpStatus` for HTTP adapters, and a message that says
 * what to do. The code/status table is the public contract (see the README's
 * error table); adapters map `httpStatus` and never hand-map classes.
 *
 * The shape follows tRPC's string error codes rather than numeric ones.
 */
import { deferStacks, dropEmptyStack, resumeCapture, suspendCapture } from "./error-stack.js";

export class IdempoError extends Error {
  /** Stable machine-readable code, e.g. `key_in_progress`. */
  readonly code: string;
  /** The HTTP status an adapter should answer with. */
  readonly httpStatus: number;

  constructor(code: string, httpStatus: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.httpStatus = httpStatus;
  }
}

/** How every message names a key: "idempotency key 'k' (tenant 't')". */
function keyName(tenantId: string, key: string): string {
  return `idempotency key '${key}' (tenant '${tenantId}')`;
}

/**
 * The key is held by another attempt whose lease is still valid (409).
 * Retry after `retryAfterMs` (milliseconds, measured on the database clock);
 * HTTP adapters send it as `Retry-After` in whole seconds.
 *
 * Its `stack` is taken when it is first read, where it is read (the frames
 * of the code that caught or printed it), not inside the engine where it
 * was raised: a 409 is an ordinary answer under load, and the walk of the
 * stack was most of what making one cost.
 */
export class IdempotencyKeyInProgressError extends IdempoError {
  /** Milliseconds until the current lease expires (DB clock), at least 0. */
  readonly retryAfterMs: number;
  constructor(tenantId: string, key: string, retryAfterMs: number) {
    const suspended = suspendCapture();
    try {
      super(
        "key_in_progress",
        409,
        `${keyName(tenantId, key)} is being processed by another attempt; retry in ${retryAfterMs} ms`,
      );
    } finally {
      resumeCapture(suspended);
    }
    dropEmptyStack(this, suspended);
    this.retryAfterMs = retryAfterMs;
  }
}
deferStacks(IdempotencyKeyInProgressError);

/**
 * The key was first used with a different request fingerprint or a different
 * workflow (422). The stored record is left untouched. As in Stripe's API, a
 * key names one intent; use a new key for a new request.
 */
export class IdempotencyKeyMismatchError extends IdempoError {
  constructor(tenantId: string, key: string, detail: string) {
    super(
      "key_mismatch",
      422,
      `${keyName(tenantId, key)} was first used with ${detail}; use a new key for a different request`,
    );
  }
}

/**
 * The key named a request that completed, and its stored record has expired
 * (410): only its tombstone is left, which keeps no response to replay. The
 * request is refused instead of running again, whether or not the sweeper
 * has removed the record yet; a different payload under the key is still a
 * mismatch (422). A retry this late is usually a queue replay or a client
 * that kept a request for days: check what the first request did (its
 * `outcome`) before sending a new one with a new key. After
 * `tombstoneUntil` the key is forgotten and runs again as new (workflow
 * option `tombstoneMs`; see docs/retention.md).
 */
export class IdempotencyKeyExpiredError extends IdempoError {
  /** How the run ended: `succeeded`, `failed`, `errored` or `canceled`. */
  readonly outcome: string;
  /** When the run completed (DB clock). */
  readonly completedAt: Date;
  /** When its record expired, the end of its retention (DB clock). */
  readonly expiredAt: Date;
  /** When the tombstone goes (DB clock); from then on the key runs again as new. */
  readonly tombstoneUntil: Date;
  constructor(
    tenantId: string,
    key: string,
    tombstone: { outcome: string; completedAt: Date; expiredAt: Date; tombstoneUntil: Date },
  ) {
    super(
      "key_expired",
      410,
      `${keyName(tenantId, key)} named a request that completed (${tombstone.outcome}) at ` +
        `${tombstone.completedAt.toISOString()}; its stored response expired at ${tombstone.expiredAt.toISOString()}, ` +
        "so it is not run again: use a new key for a new request",
    );
    this.outcome = tombstone.outcome;
    this.completedAt = tombstone.completedAt;
    this.expiredAt = tombstone.expiredAt;
    this.tombstoneUntil = tombstone.tombstoneUntil;
  }
}

/** One problem found in an input value: where it is and what is wrong. */
export interface InputIssue {
  /** JSON-path-like location, e.g. `$.items[2].amount`. */
  path: string;
  message: string;
}

/**
 * The input is not a storable JSON value or fails the workflow's zod schema
 * (400). Raised before anything is claimed: no row is written.
 */
export class InputValidationError extends IdempoError {
  /** Every problem found, each with its path. */
  readonly issues: readonly InputIssue[];
  constructor(issues: readonly InputIssue[], options?: { cause?: unknown }) {
    super("invalid_input", 400, `invalid input: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, options);
    this.issues = issues;
  }
}

/**
 * The idempotency key or tenant id is malformed (400): empty, whitespace
 * only, longer than 255 UTF-8 bytes, or holding a control character.
 * Raised before the database is touched.
 */
export class InvalidIdempotencyKeyError extends IdempoError {
  constructor(message: string) {
    super("invalid_key", 400, message);
  }
}

/**
 * This attempt no longer owns the key: its lease expired and another attempt
 * took over (409). The transaction that found out was rolled back, so none of
 * its writes persist. The run carries on in the attempt that took over.
 */
export class LeaseLostError extends IdempoError {
  constructor(tenantId: string, key: string, at: string) {
    super(
      "lease_lost",
      409,
      `lost the lease on ${keyName(tenantId, key)} at ${at}: another attempt took over; this attempt's last transaction was rolled back`,
    );
  }
}

/**
 * The workflow definition is invalid (duplicate names, a bad version
 * number, replaced versions that do not fit), or a stored run cannot be
 * resumed by any deployed version of its workflow because its recovery
 * point or the steps after it changed (500). Deploy the run's version next
 * to the new one (`.version(n).replaces(old)`) to finish such runs, or
 * cancel them deliberately.
 */
export class WorkflowDefinitionError extends IdempoError {
  constructor(message: string) {
    super("workflow_definition", 500, message);
  }
}

/**
 * Workflow code used the API in a way it cannot honour, for example
 * `ctx.reject` after a phase has committed (500). The record stays at its
 * last recovery point.
 */
export class WorkflowUsageError extends IdempoError {
  constructor(message: string) {
    super("workflow_usage", 500, message);
  }
}

/**
 * A phase result, step result or response body cannot be stored as JSON
 * (500). Names the phase, step or `respond` and the path of the bad value.
 * The run stays at its last recovery point.
 */
export class UnstorableValueError extends IdempoError {
  /** Every problem found, each with its path. */
  readonly issues: readonly InputIssue[];
  constructor(where: string, issues: readonly InputIssue[]) {
    super(
      "unstorable_value",
      500,
      `${where} returned a value that cannot be stored as JSON: ${issues
        .map((i) => `${i.path}: ${i.message}`)
        .join("; ")}`,
    );
    this.issues = issues;
  }
}

/**
 * A value the engine would store is larger than the engine's
 * `maxPayloadBytes` (413): an input, a signal payload, a phase or step
 * result, an outbox payload, a response body (`respond`, `ctx.fail`,
 * `accepted`, `cancel`), measured on its own as canonical JSON in UTF-8
 * bytes. Raised before anything is written: an input or a signal over the
 * bound is not claimed or stored; a value the run produced over it parks
 * the run at its last recovery point, as a value that cannot be stored
 * does (no retry can make it smaller). Keep large data elsewhere (object
 * storage, the application's own table) and pass a reference, or raise
 * `maxPayloadBytes`.
 */
export class PayloadTooLargeError extends IdempoError {
  /** The value's size: canonical JSON, UTF-8 bytes. */
  readonly bytes: number;
  /** The bound it is over (`createEngine({ maxPayloadBytes })`). */
  readonly maxPayloadBytes: number;
  constructor(what: string, bytes: number, maxPayloadBytes: number) {
    super(
      "payload_too_large",
      413,
      `${what} is ${bytes} bytes as canonical JSON, over the engine's maxPayloadBytes of ${maxPayloadBytes}; ` +
        "nothing was stored: keep large data elsewhere and pass a reference, or raise maxPayloadBytes",
    );
    this.bytes = bytes;
    this.maxPayloadBytes = maxPayloadBytes;
  }
}

/**
 * The run is parked (500): the engine stopped trying it, because its
 * attempts reached the workflow's `maxAttempts` or because it produced a
 * value that cannot be stored, which no retry can cure. A parked run is
 * never taken over by a retry or by `resumeStale`. Fix the code or data,
 * then `engine.unpark(tenantId, key)` (or `idempo keys unpark`) makes it
 * takeable again with a fresh attempt budget; `engine.cancel` finishes it
 * with a stored answer instead. The idea is DBOS's dead-letter state.
 */
export class RunParkedError extends IdempoError {
  /** Why the run was parked, as stored in the record (`parkedReason`). */
  readonly reason: string;
  constructor(tenantId: string, key: string, reason: string) {
    super(
      "run_parked",
      500,
      `the run of ${keyName(tenantId, key)} is parked: ${reason}; ` +
        "fix the cause, then unpark it (engine.unpark or `idempo keys unpark`) or cancel it",
    );
    this.reason = reason;
  }
}

/**
 * An operator verb was refused by the run's state (409): `cancel` of a
 * completed run, `retryFrom` of a live or completed run, `forget` of a live
 * lease without `force`, `unpark` of a run that is not parked, `release` of
 * a completed, parked or suspended run. Nothing was changed. The message
 * names the state found and what would be allowed.
 */
export class RunStateError extends IdempoError {
  /** The status the run had when the verb was refused. */
  readonly status: string;
  constructor(tenantId: string, key: string, status: string, message: string) {
    super("run_state", 409, `${keyName(tenantId, key)}: ${message}`);
    this.status = status;
  }
}

/** An operator verb named a key that has no record (404). Nothing was changed. */
export class RunNotFoundError extends IdempoError {
  constructor(tenantId: string, key: string) {
    super("run_not_found", 404, `no record for ${keyName(tenantId, key)}`);
  }
}

/**
 * An attempt ran past its bound (`attemptTimeoutMs` of the workflow or the
 * engine) and was stopped (503): its lease renewal stopped, it gave the key
 * up and its `signal` aborted, so the next retry (or `resumeStale`) takes
 * over at once and resumes after the last recovery point. Whatever the
 * attempt had not committed is rolled back; its later writes fail.
 */
export class AttemptTimeoutError extends IdempoError {
  /** The bound that passed, in ms. */
  readonly attemptTimeoutMs: number;
  constructor(tenantId: string, key: string, attemptTimeoutMs: number, at: string) {
    super(
      "attempt_timeout",
      503,
      `the attempt on ${keyName(tenantId, key)} ran longer than its bound of ` +
        `${attemptTimeoutMs} ms (attemptTimeoutMs) in ${at}: it gave the key up; retry to take over and resume ` +
        "after the last recovery point",
    );
    this.attemptTimeoutMs = attemptTimeoutMs;
  }
}

/**
 * An option is unknown, of the wrong type or out of range (500, a
 * programming error): in `createEngine`, `workflow` and its items, a call
 * (`runOnce`, `enqueue`, `wait`, `sweep`, `listKeys`, an operator verb,
 * `outbox.enqueue`), `startWorker` or `startRelay`. Raised when the engine,
 * workflow or loop is built, or when the call is made, before anything
 * touches the database. An unknown key is named with the known ones (so a
 * misspelt `timeOutMs` never turns a timeout off); a bad value is named
 * with its type and the allowed range, so that a value which would
 * silently break the lease (a heartbeat slower than the lease, a timer
 * beyond Node's limit) never runs.
 */
export class InvalidOptionError extends IdempoError {
  /** The option, e.g. `heartbeatMs` or `sweep batchSize`. */
  readonly option: string;
  constructor(option: string, message: string) {
    super("invalid_option", 500, message);
    this.option = option;
  }
}

/**
 * A phase kept failing on transient database conflicts (503):
 * serialization failures (40001), deadlocks (40P01) or lock waits past the
 * phase's `lockTimeoutMs` (55P03), retried in process with jitter until
 * their count or time budget ran out. Each try rolled back whole; the run
 * stays at its last recovery point and a retry of the key resumes there.
 * The last database error is the `cause`.
 */
export class PhaseConflictError extends IdempoError {
  /** The phase that could not commit. */
  readonly phase: string;
  /** Tries made, the first included. */
  readonly tries: number;
  constructor(phase: string, tries: number, elapsedMs: number, cause: unknown) {
    const code = (cause as { code?: unknown } | undefined)?.code;
    super(
      "phase_conflict",
      503,
      `phase '${phase}' hit transient database conflicts ${tries} times in ${elapsedMs} ms (last: SQLSTATE ${String(
        code,
      )}); each try rolled back, the run stays at its last recovery point: retry the key later`,
      { cause },
    );
    this.phase = phase;
    this.tries = tries;
  }
}
