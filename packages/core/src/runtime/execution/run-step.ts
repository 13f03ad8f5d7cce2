/** The runner of a `.step` item: a call to another system, made once per derived key. */
import { deriveStepKey } from "../../keys/derived-key.js";
import type { Advance } from "../../store/progress.js";
import { recordStepResult, recordStepStarted } from "../../store/progress.js";
import { keyHash } from "../../telemetry/telemetry.js";
import { FailThrow } from "./control-flow.js";
import type { ItemRun, Outcome } from "./item-run.js";
import { advanced, completeWithFailure, control, itemProgress, withResponse } from "./item-run.js";
import { awaitRetryToken, awaitToken } from "./rate-token.js";
import { callStep, reconcileInDoubt } from "./step-call.js";
import { StepTries } from "./step-tries.js";

/**
 * A `.step` item: record its start, reconcile when an earlier attempt may
 * have called already, call it with its derived key, and record its result.
 */
export async function runStep(run: ItemRun<"step">): Promise<Outcome> {
  const { deps, plan, lease, item, info, hook, openStep, span } = run;
  const where = `step '${item.name}'`;
  const idempotencyKey = deriveStepKey(plan.own.tenantId, plan.own.key, plan.def.name, item.name);
  if (span.recording) span.set({ "idempo.step.derived_key.hash": keyHash(plan.own.tenantId, idempotencyKey) });
  const rateLimit = item.options.rateLimit;
  if (rateLimit !== undefined) {
    // A token first: a run suspended for one has not started the step.
    const suspended = await awaitToken(run, rateLimit, item.options.timeoutMs ?? null);
    if (suspended) return suspended;
  }
  const started = await recordStepStarted(deps.db, deps.tables, plan.own, {
    name: item.name,
    attempt: plan.attempt,
    derivedKey: idempotencyKey,
  });
  if (!started) throw lease.lost();
  openStep.entryId = started.entryId;
  span.set({ "idempo.step.in_doubt": started.priorStarts > 0 });
  if (hook) await hook(`before:step:${item.name}`);
  let result: unknown;
  let outcome: "succeeded" | "reconciled" = "succeeded";
  // Every call in this attempt; a reconciled step makes none.
  const tries = new StepTries();
  openStep.tries = tries;
  try {
    result = await reconcileInDoubt(item, started.priorStarts, info, idempotencyKey, lease, lease);
    if (result !== undefined) outcome = "reconciled";
    if (outcome === "succeeded") {
      const ctl = control();
      let retries = 0;
      const onRetry = async () => {
        retries++;
        span.set({ "idempo.step.retries": retries });
        deps.telemetry.count("stepRetries", { "idempo.workflow": plan.def.name, "idempo.item": item.name });
        if (rateLimit !== undefined) await awaitRetryToken(run, rateLimit);
      };
      result = await lease.until(
        callStep(
          item,
          info,
          ctl,
          idempotencyKey,
          lease,
          onRetry,
          {
            workflow: plan.def.name,
            step: item.name,
            tenantId: plan.own.tenantId,
            key: plan.own.key,
            attempt: plan.attempt,
          },
          tries,
        ),
      );
      ctl.rethrowCaught();
    }
  } catch (error) {
    if (!(error instanceof FailThrow)) throw error;
    openStep.entryId = null;
    openStep.tries = null;
    return completeWithFailure(run, {
      db: deps.db,
      failure: error,
      item: { kind: "step", name: item.name, entryId: started.entryId, tries: tries.toJson() },
    });
  }
  openStep.entryId = null;
  openStep.tries = null;
  const triesJson = tries.toJson();
  span.set({ "idempo.step.reconciled": outcome === "reconciled" });
  if (hook) await hook(`called:step:${item.name}`);
  const { state, progress } = itemProgress(run, where, result);
  let advance: Advance;
  try {
    advance = await withResponse(run, progress, state);
  } catch (error) {
    // The call happened: keep its result even though respond failed, so a retry does not call again.
    if (!(await recordStepResult(deps.db, deps.tables, plan.own, started.entryId, outcome, progress, triesJson)))
      throw lease.lost();
    throw error;
  }
  if (advance.response) lease.finishing();
  if (!(await recordStepResult(deps.db, deps.tables, plan.own, started.entryId, outcome, advance, triesJson)))
    throw lease.lost();
  return advanced(advance, state);
}
