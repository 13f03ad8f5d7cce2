/**
 * The rules a durable signal must pass to be kept for a run, beside the
 * statements that keep it (`store/signals.ts`): the run's workflow waits for
 * the name; the payload passes that wait's schema in the run's own version;
 * and what the delivery statement found decides between new, duplicate,
 * mismatch, too late and timed out.
 */
import { IdempotencyKeyMismatchError, InputValidationError, RunStateError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import type { SignalStored, SignalTarget } from "../../store/signals.js";
import { TIMED_OUT } from "../../store/signals.js";
import { checkWaitPayload } from "../execution/values.js";
import type { KnownWorkflows } from "../known-workflows.js";

/** What `signal` did. */
export interface SignalResult {
  /**
   * True when the same signal (name and canonical payload) had already been
   * delivered to the run: nothing was changed.
   */
  readonly duplicate: boolean;
  /** True when the run was suspended waiting for this signal and is now due. */
  readonly woke: boolean;
}

/**
 * The run's workflow must wait for `name`, per the outline it started under.
 *
 * @throws InputValidationError naming the waits it has.
 */
export function checkWaitsFor(run: SignalTarget, name: string): void {
  if (run.outline.includes(`wait:${name}`)) return;
  const waits = run.outline.filter((e) => e.startsWith("wait:")).map((e) => e.slice(5));
  throw new InputValidationError([
    {
      path: "name",
      message: `workflow '${run.workflow}' waits for no signal '${name}' (it waits for: ${
        waits.length > 0 ? waits.join(", ") : "none"
      })`,
    },
  ]);
}

/**
 * The payload must pass the wait's schema when this engine knows the run's
 * workflow: the run's own version when deployed (that is the schema the run
 * parses the payload with), else the first known version's.
 *
 * @throws InputValidationError with the schema's issues under `payload`.
 */
export async function checkPayload(
  known: KnownWorkflows,
  run: SignalTarget,
  name: string,
  json: JsonValue,
): Promise<void> {
  const versions = known.versions(run.workflow);
  const own = versions.find((def) => def.version === run.workflowVersion);
  const item = (own ? [own] : versions).flatMap((def) => def.items).find((i) => i.kind === "wait" && i.name === name);
  if (item?.kind !== "wait" || !item.options.schema) return;
  const checked = await checkWaitPayload(item, json);
  if (!checked.ok) {
    throw new InputValidationError(
      checked.issues.map((at) => ({ ...at, path: `payload${at.path.slice(1)}` })),
      { cause: checked.error },
    );
  }
}

/**
 * What the delivery statement's finding means for the caller.
 *
 * @throws RunStateError the wait timed out before the signal, or the run completed before it.
 * @throws IdempotencyKeyMismatchError another payload was delivered under the name.
 */
export function acceptance(
  run: SignalTarget & { tenantId: string; key: string },
  name: string,
  fingerprint: string,
  done: SignalStored,
): SignalResult {
  const { tenantId, key } = run;
  if (done.existing !== null) {
    if (done.existing === TIMED_OUT) {
      throw new RunStateError(
        tenantId,
        key,
        run.status,
        `timed out waiting for signal '${name}' before it arrived; the run went on without it ` +
          "(onTimeout or a stored 408), so the signal changes nothing",
      );
    }
    if (done.existing === fingerprint) return { duplicate: true, woke: false };
    throw new IdempotencyKeyMismatchError(tenantId, key, `a different payload for signal '${name}'`);
  }
  if (!done.stored) {
    throw new RunStateError(
      tenantId,
      key,
      run.status,
      `is completed: signal '${name}' arrived after the run finished and changes nothing (its stored response is replayed)`,
    );
  }
  return { duplicate: false, woke: done.woke };
}
