/**
 * Resuming a run that an attempt took over (an expired lease) or took as due
 * (a suspended run whose time or signal came): under the deployed version
 * that fits it, from its recovery point, with its stored input and state.
 */
import { InputValidationError, RunParkedError } from "../../errors.js";
import type { JsonObject, JsonValue } from "../../json/json-value.js";
import type { TakenRun } from "../../store/run-store.js";
import { parkOwnRun } from "../../store/transitions.js";
import type { SpanScope, Telemetry } from "../../telemetry/telemetry.js";
import { keyHash } from "../../telemetry/telemetry.js";
import type { Definition } from "../../workflow/definition.js";
import type { EngineContext } from "../engine-context.js";
import { slotFor, takeSlot } from "./concurrency-slot.js";
import { execute } from "./executor.js";
import { pickDefinition } from "./resumable.js";
import type { RunResult } from "./run-result.js";
import { deepFreeze, reparseInput } from "./values.js";

/** SPEC: a workflow that sets no `maxAttempts` gets 20. */
export const DEFAULT_MAX_ATTEMPTS = 20;

/** One taken run to resume. */
export interface TakenAttempt {
  /** The deployed versions of the run's workflow, newest first. */
  readonly deployed: readonly Definition[];
  readonly taken: TakenRun;
  readonly own: { readonly tenantId: string; readonly key: string; readonly ownerToken: string };
  /** The lease the take set, in ms. */
  readonly leaseMs: number;
  readonly span: SpanScope;
  readonly how: "takeover" | "due";
}

/**
 * Resume a taken run under the deployed version that fits it, first taking
 * a slot of its `.concurrency` key when it has one.
 *
 * @throws OverLimit when every slot is held: the run was stepped aside (see `concurrency-slot.ts`).
 */
export async function resumeTaken(ctx: EngineContext, attempt: TakenAttempt): Promise<RunResult<unknown>> {
  const { deployed, taken, own, span } = attempt;
  span.set({ "idempo.attempt": taken.attempt });
  const def = deployed[0] as Definition;
  if (attempt.how === "takeover") {
    ctx.telemetry.log(
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
  const input = await storedInput(ctx, picked, taken, own);
  const slot = slotFor(picked, { input, tenantId: own.tenantId, key: own.key });
  if (slot) await takeSlot(ctx.db, ctx.tables, own, slot);
  return execute(ctx.executorDeps(), {
    def: picked,
    own: { ...own, runId: taken.runId },
    attempt: taken.attempt,
    input,
    state: deepFreeze(JSON.parse(taken.state) as JsonObject),
    recoveryPoint: taken.recoveryPoint,
    leaseMs: attempt.leaseMs,
    span,
    attemptTimeoutMs: picked.options.attemptTimeoutMs ?? ctx.attemptTimeoutMs,
    ...(slot ? { slot: slot.limitKey } : {}),
  });
}

/**
 * The stored input as the schema parses it. An input that fails the schema
 * (one enqueued through SQL, which cannot check it; or a schema made
 * stricter since the claim) can never pass, so the run is parked at once,
 * with the schema's issues as its reason, instead of failing attempt after
 * attempt.
 *
 * @throws RunParkedError when it parked the run.
 */
async function storedInput(
  ctx: EngineContext,
  def: Definition,
  taken: TakenRun,
  own: TakenAttempt["own"],
): Promise<unknown> {
  try {
    return await reparseInput(def, JSON.parse(taken.input) as JsonValue, taken.parsedInputHash);
  } catch (error) {
    if (!(error instanceof InputValidationError)) throw error;
    const issues = error.issues.map((i) => `${i.path}: ${i.message}`).join("; ");
    const reason =
      `the stored input fails the input schema of workflow '${def.name}' version ${def.version} (${issues}); ` +
      "an input enqueued through SQL is checked only when a worker takes the run: cancel it, or change the schema and unpark it";
    if (!(await parkOwnRun(ctx.db, ctx.tables, { ...own, runId: taken.runId }, reason))) throw error;
    throw new RunParkedError(own.tenantId, own.key, reason);
  }
}

/** A takeover that would have started attempt maxAttempts + 1 parked the run instead: count and log it. */
export function reportParkedByTakeover(
  telemetry: Telemetry,
  run: { workflow: string; tenantId: string; key: string; reason: string },
): void {
  telemetry.count("parked", { "idempo.workflow": run.workflow, "idempo.parked.reason": "max_attempts" });
  telemetry.log(
    "warn",
    { workflow: run.workflow, tenantId: run.tenantId, keyHash: keyHash(run.tenantId, run.key), reason: run.reason },
    "idempo: run parked: it used up its attempts; fix the cause, then unpark it",
  );
}
