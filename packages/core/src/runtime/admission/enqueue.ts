/**
 * `engine.enqueue`: admit the request inside the caller's transaction and
 * create the run suspended and due at once, for a worker (or a `runOnce`
 * with the same key and payload) to take.
 */
import { WorkflowDefinitionError, WorkflowUsageError } from "../../errors.js";
import { newId } from "../../ids.js";
import { ENQUEUE_REQUEST } from "../../options/known-options.js";
import { MAX_PRIORITY } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import type { EnqueuedRun, EnqueueOutcome } from "../../store/enqueue.js";
import { enqueueRun, reclaimExpiredForEnqueue } from "../../store/enqueue.js";
import type { Executor } from "../../store/run-store.js";
import type { Workflow } from "../../workflow/definition.js";
import type { EngineContext } from "../engine-context.js";
import { tombstoneMsOf } from "../engine-context.js";
import { inSession } from "../engine-db.js";
import { slotFor } from "../execution/concurrency-slot.js";
import type { FoundKey, KeyLook } from "./admission.js";
import { admit, checkRequest } from "./admission.js";
import type { RunOnceRequest } from "./run-once.js";

/** The arguments of one `enqueue` call: the run's key and input, as for `runOnce`, and its priority. */
export type EnqueueRequest<In> = Omit<RunOnceRequest<In>, "waitInFlightMs"> & {
  /**
   * Workers take a tenant's due runs by priority, higher first, within each
   * tenant's fair share: an integer from -2 147 483 647 to 2 147 483 647
   * (Default: the workflow's `.priority`, else 0). Kept with the run: a
   * later change of the workflow's priority does not reorder it. A key that
   * already names the same request keeps the priority it was enqueued with.
   */
  priority?: number;
};

/** What `enqueue` did. */
export interface EnqueueResult {
  /**
   * True when this call created the run (it exists once the caller's
   * transaction commits); false when the key already names the same
   * request (in any state): nothing was changed.
   */
  readonly created: boolean;
}

/** Create the run in the caller's transaction; see `Engine.enqueue`. */
export async function enqueue<In>(
  ctx: EngineContext,
  tx: unknown,
  wf: Workflow<In, unknown>,
  request: EnqueueRequest<In>,
): Promise<EnqueueResult> {
  const def = wf?.definition;
  if (!def?.items) throw new WorkflowDefinitionError("enqueue needs a workflow built with workflow(...).respond(...)");
  const session = ctx.layer.sessionOf(tx);
  if (session === undefined) {
    throw new WorkflowUsageError(
      "enqueue needs the caller's transaction of the engine's data layer as its first argument (a Kysely " +
        "transaction or instance, a Drizzle transaction, a node-postgres client inside BEGIN)",
    );
  }
  // The caller's transaction: a statement that fails in it is not sent again.
  return enqueueOn(ctx, inSession(session), wf, request);
}

/** Create the run with the engine's statements on `on` (a transaction of the engine's own, or the caller's). */
export async function enqueueOn<In>(
  ctx: EngineContext,
  on: Executor,
  wf: Workflow<In, unknown>,
  request: EnqueueRequest<In>,
): Promise<EnqueueResult> {
  const def = wf.definition;
  ctx.workflows.rememberCalled(def);
  const checked = await checkRequest(def, request, "enqueue", ENQUEUE_REQUEST, ctx.maxPayloadBytes);
  const priority = intOption("enqueue", "priority", request.priority, -MAX_PRIORITY, MAX_PRIORITY);
  // Only checked here (a key function that fails leaves no run); the worker that takes the run computes it again.
  slotFor(def, { input: checked.input, tenantId: checked.tenantId, key: checked.key });
  const run: EnqueuedRun = {
    tenantId: checked.tenantId,
    key: checked.key,
    runId: newId(),
    workflow: def.name,
    outline: def.outline,
    definitionHash: def.hash,
    workflowVersion: def.version,
    fingerprint: checked.fingerprint,
    input: checked.inputText,
    parsedInputHash: checked.parsedHash,
    retentionMs: def.options.retentionMs ?? ctx.retentionMs,
    tombstoneMs: tombstoneMsOf(def),
    priority: priority ?? def.options.priority ?? null,
  };
  return admit<FoundKey, EnqueueResult>(checked, def.name, {
    claim: async () => lookOf(await enqueueRun(on, ctx.tables, run)),
    reclaimExpired: () => reclaimExpiredForEnqueue(on, ctx.tables, run),
    claimed: async () => ({ created: true }),
    // The same request, in any state: nothing to change.
    existing: async () => ({ created: false }),
    inProgress: async () => {},
    report: () => {},
  });
}

function lookOf(found: EnqueueOutcome): KeyLook<FoundKey> {
  if (found.kind === "existing") return { kind: "existing", run: found };
  return found.kind === "created" ? { kind: "claimed" } : found;
}
