/**
 * `engine.runOnce`: admit the request, then start a new run, replay the
 * stored answer, resume a due suspended run, take over an expired lease, or
 * wait (within `waitInFlightMs`) for the attempt that holds the key.
 */
import {
  DatabaseUnavailableError,
  IdempotencyKeyInProgressError,
  RunParkedError,
  WorkflowDefinitionError,
} from "../../errors.js";
import { newId } from "../../ids.js";
import { RUN_ONCE_REQUEST } from "../../options/known-options.js";
import { MAX_TIMER_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import type { NewRun } from "../../store/claim.js";
import { claimNewKey, reclaimExpiredKey, takeOverExpiredLease } from "../../store/claim.js";
import type { SlotRequest } from "../../store/concurrency-slots.js";
import { takeDueRun } from "../../store/due-runs.js";
import type { ExistingRun } from "../../store/run-store.js";
import type { ClaimResult, SpanScope } from "../../telemetry/telemetry.js";
import type { Definition, Workflow } from "../../workflow/definition.js";
import { versionsOf } from "../../workflow/versions.js";
import type { EngineContext } from "../engine-context.js";
import { leaseFor, runAttributes, tombstoneMsOf } from "../engine-context.js";
import { translateEntryErrors } from "../entry-errors.js";
import { retryAfterOverLimit, slotFor, takeSlot } from "../execution/concurrency-slot.js";
import { isConnectionLoss } from "../execution/db-errors.js";
import { execute } from "../execution/executor.js";
import type { FoldedClaim } from "../execution/folded-claim.js";
import { ClaimTaken, mayFoldClaim } from "../execution/folded-claim.js";
import { DEFAULT_MAX_ATTEMPTS, reportParkedByTakeover, resumeTaken } from "../execution/resume.js";
import type { RunResult } from "../execution/run-result.js";
import { storedResult } from "../execution/run-result.js";
import type { Watch } from "../signal-delivery/completion-waiter.js";
import { FIRST_PAUSE_MS, MAX_PAUSE_MS } from "../signal-delivery/completion-waiter.js";
import type { CheckedRequest, KeyLook } from "./admission.js";
import { admit, checkRequest } from "./admission.js";

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
   * otherwise; no pooled connection is held while waiting. While waiting, a
   * lost connection (a failover) is one more reason to look again, until
   * the time is up.
   * 0 to 2 147 483 647 (Default: 0, answer at once).
   */
  waitInFlightMs?: number;
}

/** Run `workflow` once for the request's key; see `Engine.runOnce`. */
export function runOnce<In, B>(
  ctx: EngineContext,
  wf: Workflow<In, B>,
  request: RunOnceRequest<In>,
): Promise<RunResult<B>> {
  const { telemetry } = ctx;
  const name = wf?.definition?.name ?? "unknown";
  const attributes = () => runAttributes(name, request?.tenantId, request?.key);
  const started = performance.now();
  return telemetry.span(`runOnce ${name}`, "internal", attributes, async (span) => {
    const claimed = (result: ClaimResult) => {
      span.set({ "idempo.claim.result": result });
      telemetry.count("claims", { "idempo.workflow": name, "idempo.claim.result": result });
    };
    try {
      // Translated inside the span, so that it records the error the caller gets.
      const result = await translateEntryErrors(
        claimAndRun(ctx, wf, request, span, claimed),
        ctx.tables.schema,
        "runOnce",
      );
      span.set({ "idempo.outcome": result.outcome, "idempo.replayed": result.replayed });
      return result;
    } finally {
      telemetry.duration("runDuration", performance.now() - started, { "idempo.workflow": name });
    }
  });
}

/** The call's claim report: on the span and in the `claims` counter. */
type Report = (result: ClaimResult) => void;

async function claimAndRun<In, B>(
  ctx: EngineContext,
  wf: Workflow<In, B>,
  request: RunOnceRequest<In>,
  span: SpanScope,
  claimed: Report,
): Promise<RunResult<B>> {
  const def = wf?.definition;
  if (!def) throw new WorkflowDefinitionError("runOnce needs a workflow built with workflow(...).respond(...)");
  ctx.workflows.rememberCalled(def);
  const checked = await checkRequest(def, request, "runOnce", RUN_ONCE_REQUEST, ctx.maxPayloadBytes);
  const runLease = leaseFor(ctx, def);
  const { tenantId, key } = checked;
  // Computed before anything is claimed: a key function that fails leaves no record.
  const slot = slotFor(def, { input: checked.input, tenantId, key });

  const waitMs = intOption("runOnce", "waitInFlightMs", request.waitInFlightMs, 0, MAX_TIMER_MS, 0);
  const deadline = performance.now() + waitMs;
  let watch: Watch | undefined;
  let pause = FIRST_PAUSE_MS;
  let fresh: NewRun | undefined;
  /** The result of a run that claimed its key in its first phase and ran in the claim round. */
  let folded: RunResult<B> | undefined;
  const call: Call = { ctx, def, checked, runLease, span, claimed, slot, landed: false };
  /**
   * Once the call waits for another attempt, a lost connection (a failover)
   * is one more reason to look again after a pause, until the deadline: a
   * claim or takeover that may have landed left a live lease of this call's
   * own, which the next rounds wait out and take over like any other.
   */
  const patient = async <T>(work: () => Promise<T>): Promise<T> => {
    for (;;) {
      try {
        return await work();
      } catch (error) {
        const left = deadline - performance.now();
        // Once a claim landed, the run itself failed: not a look to repeat.
        if (!watch || left <= 0 || call.landed) throw error;
        if (!(error instanceof DatabaseUnavailableError || isConnectionLoss(error))) throw error;
        await watch.pause(Math.min(left, pause));
        pause = Math.min(MAX_PAUSE_MS, pause * 2);
      }
    }
  };
  try {
    return await admit<ExistingRun, RunResult<B>>(checked, def.name, {
      claim: () =>
        patient(async () => {
          fresh = newRun(call);
          if (!foldsClaim(def, slot) || !claimedAloneOnce.has(ctx.tables.calls)) {
            claimedAloneOnce.add(ctx.tables.calls);
            return claimNewKey(ctx.db, ctx.tables, fresh);
          }
          const ran = await startInFirstPhase(call, fresh);
          if ("kind" in ran) return ran;
          folded = ran as RunResult<B>;
          return { kind: "claimed" };
        }),
      reclaimExpired: () => reclaimExpiredKey(ctx.db, ctx.tables, fresh as NewRun),
      // Over the concurrency limit, the run waits stepped aside: answered as a key in progress.
      claimed: () =>
        folded
          ? Promise.resolve(folded)
          : (retryAfterOverLimit(start(call, fresh as NewRun)) as Promise<RunResult<B> | number>),
      existing: (found) =>
        patient(() => retryAfterOverLimit(answerExisting(call, found)) as Promise<RunResult<B> | "again" | number>),
      /**
       * Another attempt holds the key: answer 409 now, or, within
       * `waitInFlightMs`, pause (no connection held) and look again.
       */
      inProgress: async (retryAfterMs) => {
        const left = deadline - performance.now();
        if (left <= 0) {
          claimed("in_progress");
          throw new IdempotencyKeyInProgressError(tenantId, key, Math.max(0, retryAfterMs));
        }
        watch ??= ctx.waiter.watch(tenantId, key);
        await watch.pause(Math.min(left, pause, Math.max(1, retryAfterMs)));
        pause = Math.min(MAX_PAUSE_MS, pause * 2);
      },
      report: claimed,
    });
  } finally {
    watch?.close();
  }
}

/** What one `runOnce` call decides with, round after round. */
interface Call {
  readonly ctx: EngineContext;
  readonly def: Definition;
  readonly checked: CheckedRequest;
  readonly runLease: number;
  readonly span: SpanScope;
  readonly claimed: Report;
  /** The slots of the workflow's `.concurrency` key; absent without one. */
  readonly slot: SlotRequest | undefined;
  /** Set once a claim of this call's made the key its own. */
  landed: boolean;
}

/** The run a claim inserts: new ids each round. */
function newRun({ ctx, def, checked, runLease }: Call): NewRun {
  return {
    tenantId: checked.tenantId,
    key: checked.key,
    runId: newId(),
    workflow: def.name,
    workflowVersion: def.version,
    outline: def.outline,
    definitionHash: def.hash,
    fingerprint: checked.fingerprint,
    input: checked.inputText,
    parsedInputHash: checked.parsedHash,
    ownerToken: newId(),
    leaseMs: runLease,
    retentionMs: def.options.retentionMs ?? ctx.retentionMs,
    tombstoneMs: tombstoneMsOf(def),
  };
}

/**
 * The engines whose statements have been sent once outside a transaction:
 * that first call reads the driver (whether calls go as named statements),
 * which a call inside a phase's transaction cannot, so an engine's first
 * claim goes alone.
 */
const claimedAloneOnce = new WeakSet<object>();

/**
 * A new key may be claimed inside the run's first phase when the workflow
 * starts with a phase and has no `.concurrency` key (whose slot is taken
 * after the claim, against the record).
 */
function foldsClaim(def: Definition, slot: SlotRequest | undefined): boolean {
  return def.items[0]?.kind === "phase" && slot === undefined && mayFoldClaim(def);
}

/**
 * Run the workflow from its first phase, whose transaction claims the key
 * first: the result, or what the claim found instead of a free key.
 */
async function startInFirstPhase(call: Call, fresh: NewRun): Promise<RunResult<unknown> | KeyLook<ExistingRun>> {
  const { ctx, def, checked, runLease, span, claimed } = call;
  const claim: FoldedClaim = {
    run: fresh,
    pending: true,
    onClaimed: () => {
      // A phase tried again after a conflict claims again: reported once.
      if (call.landed) return;
      call.landed = true;
      claimed("new");
      span.set({ "idempo.attempt": 1 });
    },
  };
  try {
    return await execute(ctx.executorDeps(), {
      def,
      own: { tenantId: checked.tenantId, key: checked.key, runId: fresh.runId, ownerToken: fresh.ownerToken },
      attempt: 1,
      input: checked.input,
      state: Object.freeze({}),
      recoveryPoint: null,
      leaseMs: runLease,
      span,
      attemptTimeoutMs: def.options.attemptTimeoutMs ?? ctx.attemptTimeoutMs,
      claim,
    });
  } catch (error) {
    if (!(error instanceof ClaimTaken)) throw error;
    // The phase rolled back: nothing of this round was written, nor reported.
    call.landed = false;
    return error.look;
  }
}

/** The key is this call's: take a slot when the workflow has a limit, and run the workflow from its first item. */
async function start(call: Call, fresh: NewRun): Promise<RunResult<unknown>> {
  const { ctx, def, checked, runLease, span, claimed, slot } = call;
  claimed("new");
  span.set({ "idempo.attempt": 1 });
  const own = { tenantId: checked.tenantId, key: checked.key, runId: fresh.runId, ownerToken: fresh.ownerToken };
  if (slot) await takeSlot(ctx.db, ctx.tables, own, slot);
  return execute(ctx.executorDeps(), {
    def,
    own,
    attempt: 1,
    input: checked.input,
    state: Object.freeze({}),
    recoveryPoint: null,
    leaseMs: runLease,
    span,
    attemptTimeoutMs: def.options.attemptTimeoutMs ?? ctx.attemptTimeoutMs,
    ...(slot ? { slot: slot.limitKey } : {}),
  });
}

/** The key names this same request: a result, "again" (it changed under us), or the ms to wait while another holds it. */
async function answerExisting(call: Call, found: ExistingRun): Promise<RunResult<unknown> | "again" | number> {
  const { ctx, def, checked, runLease, span, claimed } = call;
  const { tenantId, key, fingerprint } = checked;
  if (found.status === "parked") {
    claimed("parked");
    throw new RunParkedError(tenantId, key, found.parkedReason ?? "parked");
  }
  if (found.status === "suspended") {
    if (found.wakeRemainingMs === null) return runLease;
    if (found.wakeRemainingMs > 0) return found.wakeRemainingMs;
    // Due (enqueued, woken, signalled or timed out) and no worker got there first: resume it here.
    const ownerToken = newId();
    const taken = await takeDueRun(ctx.db, ctx.tables, { tenantId, key, ownerToken, leaseMs: runLease, fingerprint });
    if (!taken) return "again";
    claimed("resume");
    const own = { tenantId, key, ownerToken };
    return resumeTaken(ctx, { deployed: versionsOf(def), taken, own, leaseMs: runLease, span, how: "due" });
  }
  if (found.status === "completed") {
    claimed("replay");
    return storedResult(found.responseStatus, found.responseBody, found.outcome);
  }
  if (found.leaseRemainingMs > 0) return found.leaseRemainingMs;
  const ownerToken = newId();
  const taken = await takeOverExpiredLease(ctx.db, ctx.tables, {
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
    reportParkedByTakeover(ctx.telemetry, { workflow: def.name, tenantId, key, reason: taken.reason });
    throw new RunParkedError(tenantId, key, taken.reason);
  }
  claimed("takeover");
  const own = { tenantId, key, ownerToken };
  return resumeTaken(ctx, {
    deployed: versionsOf(def),
    taken: taken.run,
    own,
    leaseMs: runLease,
    span,
    how: "takeover",
  });
}
