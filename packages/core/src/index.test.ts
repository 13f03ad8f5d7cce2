import { describe, expect, it } from "vitest";
import * as core from "./index.js";
import * as internal from "./internal.js";

// Changing the public API must be a decision: update this list deliberately.
describe("public exports", () => {
  it("@idempo/core exports exactly these values", () => {
    expect(Object.keys(core).sort()).toEqual([
      "AttemptTimeoutError",
      "DatabaseUnavailableError",
      "IdempoError",
      "IdempotencyKeyExpiredError",
      "IdempotencyKeyInProgressError",
      "IdempotencyKeyMismatchError",
      "InputValidationError",
      "InvalidIdempotencyKeyError",
      "InvalidOptionError",
      "LeaseLostError",
      "ListenConnectionLostError",
      "MAX_KEY_BYTES",
      "PayloadTooLargeError",
      "PhaseConflictError",
      "RunNotFoundError",
      "RunParkedError",
      "RunStateError",
      "UnstorableValueError",
      "WorkflowDefinitionError",
      "WorkflowUsageError",
      "createEngine",
      "deriveChildKey",
      "deriveStepKey",
      "stepFailureOf",
      "withPreparedStatements",
      "workflow",
    ]);
  });

  it("@idempo/core/internal exports only the fault-injection hooks, the CLI's one-shot resume of due runs, the test clock's access, the shared options check and the outline reader", () => {
    const faultHooks = ["CrashSignal", "setFaultHook", "setHeartbeatSilenced"];
    const engineInternals = ["clockAccessOf", "resumeDue"];
    const optionKinds = ["ANY", "ARRAY", "BOOLEAN", "FUNCTION", "INTEGER", "OBJECT", "STRING"];
    const optionChecks = ["checkOptions", "describeValue", "optionKind", "optionShape"];
    const outlines = ["outlineItem"];
    expect(Object.keys(internal).sort()).toEqual(
      [...faultHooks, ...engineInternals, ...optionKinds, ...optionChecks, ...outlines].sort(),
    );
  });

  it("every error carries a stable code and HTTP status", () => {
    const cases: [core.IdempoError, string, number][] = [
      [new core.IdempotencyKeyInProgressError("t", "k", 10), "key_in_progress", 409],
      [new core.IdempotencyKeyMismatchError("t", "k", "x"), "key_mismatch", 422],
      [
        new core.IdempotencyKeyExpiredError("t", "k", {
          outcome: "succeeded",
          completedAt: new Date(0),
          expiredAt: new Date(1),
          tombstoneUntil: new Date(2),
        }),
        "key_expired",
        410,
      ],
      [new core.InputValidationError([{ path: "$", message: "x" }]), "invalid_input", 400],
      [new core.InvalidIdempotencyKeyError("x"), "invalid_key", 400],
      [new core.LeaseLostError("t", "k", "x"), "lease_lost", 409],
      [new core.WorkflowDefinitionError("x"), "workflow_definition", 500],
      [new core.WorkflowUsageError("x"), "workflow_usage", 500],
      [new core.UnstorableValueError("x", []), "unstorable_value", 500],
      [new core.DatabaseUnavailableError(new Error("x")), "database_unavailable", 503],
      [new core.RunParkedError("t", "k", "x"), "run_parked", 500],
      [new core.RunStateError("t", "k", "completed", "x"), "run_state", 409],
      [new core.RunNotFoundError("t", "k"), "run_not_found", 404],
      [new core.InvalidOptionError("x", "x"), "invalid_option", 500],
      [new core.PhaseConflictError("p", 1, 1, new Error("x")), "phase_conflict", 503],
      [new core.AttemptTimeoutError("t", "k", 1, "x"), "attempt_timeout", 503],
      [new core.PayloadTooLargeError("x", 2, 1), "payload_too_large", 413],
    ];
    for (const [error, code, status] of cases) {
      expect(error).toBeInstanceOf(core.IdempoError);
      expect(error).toBeInstanceOf(Error);
      expect([error.code, error.httpStatus]).toEqual([code, status]);
    }
  });
});
