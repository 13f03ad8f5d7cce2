/**
 * The rules a durable signal must pass to be kept for a run, beside the
 * statements that keep it (`store/signals.ts`): the run's workflow waits for
 * the name; the engine has the run's own version and the payload passes
 * that wait's schema there (so an acknowledged signal is one the run can
 * use); and what the delivery statement found decides between new,
 * duplicate, mismatch, too late and timed out.
 */
import { IdempotencyKeyMismatchError, InputValidationError, RunStateError } from "../../errors.js";
import type { JsonValue } from "../../json/json-value.js";
import type { SignalStored, SignalTarget } from "../../store/signals.js";
import { TIMED_OUT } from "../../store/signals.js";
import type { Item } from "../../workflow/definition.js";
import { checkWaitPayload, discardReason } from "../execution/values.js";
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
  /**
   * Present (true) when the run completed and its record expired: only its
   * tombstone is left, which keeps no signals, so whether this one was
   * delivered before cannot be told (`duplicate` is false). Nothing was
   * stored or changed; the signal is acknowledged so that its sender stops
   * delivering it. Swept or not, the answer is the same.
   */
  readonly expired?: true;
}

/** What `signal` answers for a run whose record expired, while its tombstone lasts. */
export const EXPIRED_SIGNAL: SignalResult = Object.freeze({ duplicate: false, woke: false, expired: true });

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

/** The `.waitFor` item a signal is for, in the version the run started under, when this engine has it. */
export type OwnWait =
  | { readonly known: true; readonly item: Extract<Item, { kind: "wait" }> }
  | { readonly known: false; readonly message: string };

/**
 * Find the wait in the run's own version: that is the schema the run
 * parses the payload with. Another version's schema proves nothing about
 * it, so without the run's version the engine cannot check the payload and
 * must not store it.
 */
export function ownWait(known: KnownWorkflows, run: SignalTarget, name: string): OwnWait {
  const versions = known.versions(run.workflow);
  const own = versions.find((def) => def.version === run.workflowVersion);
  const item = own?.items.find((i): i is Extract<Item, { kind: "wait" }> => i.kind === "wait" && i.name === name);
  if (item) return { known: true, item };
  const has =
    versions.length > 0 ? `it has version ${versions.map((d) => d.version).join(", ")}` : "it has no version of it";
  return {
    known: false,
    message:
      `the run started under workflow '${run.workflow}' version ${run.workflowVersion}, which this engine does not have ` +
      `(${has}), so signal '${name}' cannot be checked against that version's schema and nothing was stored; ` +
      "give the signalling engine that version (createEngine({ workflows }), or .replaces(...) on the newest)",
  };
}

/**
 * The payload must pass the wait's schema (when it has one).
 *
 * @throws InputValidationError with the schema's issues under `payload`.
 */
export async function checkPayload(item: Extract<Item, { kind: "wait" }>, json: JsonValue): Promise<void> {
  const checked = await checkWaitPayload(item, json);
  if (!checked.ok) {
    throw new InputValidationError(
      checked.issues.map((at) => ({ ...at, path: `payload${at.path.slice(1)}` })),
      { cause: checked.error },
    );
  }
}

/**
 * The history error of a stored signal that a corrected delivery replaces,
 * or null when the stored one passes the schema (the new one is then a
 * conflicting payload).
 */
export async function unusableStoredSignal(
  item: Extract<Item, { kind: "wait" }>,
  stored: SignalStored,
): Promise<string | null> {
  if (stored.existingPayload === null) return null;
  const checked = await checkWaitPayload(item, JSON.parse(stored.existingPayload) as JsonValue);
  return checked.ok ? null : discardReason(item.name, checked.issues);
}

/**
 * What the delivery statement's finding means for the caller.
 *
 * @throws RunStateError the wait timed out before the signal, or the run completed before it, or the
 *   engine lacks the run's version and the signal is not a repeat of the one delivered.
 * @throws IdempotencyKeyMismatchError another payload was delivered under the name.
 */
export function acceptance(
  run: SignalTarget & { tenantId: string; key: string },
  name: string,
  fingerprint: string,
  done: SignalStored,
  wait: OwnWait,
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
    // Without the run's version, the stored payload may be one the run will discard: no verdict on it.
    if (!wait.known) throw new RunStateError(tenantId, key, run.status, wait.message);
    throw new IdempotencyKeyMismatchError(tenantId, key, `a different payload for signal '${name}'`);
  }
  if (!done.stored && run.status !== "completed" && !wait.known) {
    throw new RunStateError(tenantId, key, run.status, wait.message);
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
