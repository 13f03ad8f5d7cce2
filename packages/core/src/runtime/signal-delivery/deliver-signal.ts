/** `engine.signal`: check a durable signal, keep it for its run and wake the run when it waits for it. */
import { InputValidationError, RunNotFoundError } from "../../errors.js";
import { requestFingerprint } from "../../json/fingerprint.js";
import { toJsonValue } from "../../json/json-value.js";
import { assertValidKey, assertValidRunKey } from "../../keys/key-validation.js";
import { deliverSignal, lockRunForSignal } from "../../store/signals.js";
import type { EngineContext } from "../engine-context.js";
import type { SignalResult } from "./signal-acceptance.js";
import { acceptance, checkPayload, checkWaitsFor } from "./signal-acceptance.js";

/** Deliver a durable signal to a run's `.waitFor(name)`; see `Engine.signal`. */
export async function signalRun(
  ctx: EngineContext,
  tenantId: string,
  key: string,
  name: string,
  payload: unknown,
): Promise<SignalResult> {
  assertValidRunKey(tenantId, key);
  assertValidKey(name, "signal name");
  const converted = toJsonValue(payload);
  if (!converted.ok) {
    throw new InputValidationError(converted.issues.map((i) => ({ ...i, path: `payload${i.path.slice(1)}` })));
  }
  const json = converted.value;
  const fingerprint = requestFingerprint(`signal:${name}`, json);
  return ctx.db.transaction().execute(async (tx) => {
    const run = await lockRunForSignal(tx, ctx.tables, tenantId, key);
    if (!run || run.expired) throw new RunNotFoundError(tenantId, key);
    checkWaitsFor(run, name);
    await checkPayload(ctx.workflows, run, name, json);
    const done = await deliverSignal(tx, ctx.tables, {
      tenantId,
      key,
      runId: run.runId,
      name,
      payload: JSON.stringify(json),
      fingerprint,
      mayStore: run.status !== "completed",
    });
    return acceptance({ ...run, tenantId, key }, name, fingerprint, done);
  });
}
