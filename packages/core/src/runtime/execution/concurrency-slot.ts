/**
 * A workflow's `.concurrency` at the start of an attempt: the limit's key
 * computed from the run, and the slot taken before the first item runs
 * (`store/concurrency-slots.ts`), or the run stepped aside when every slot
 * is held. Workflows without a limit never reach the database here.
 */
import { LeaseLostError, WorkflowDefinitionError } from "../../errors.js";
import { MAX_KEY_BYTES } from "../../keys/key-validation.js";
import type { SlotRequest } from "../../store/concurrency-slots.js";
import { acquireSlot } from "../../store/concurrency-slots.js";
import type { Executor, Ownership, Tables } from "../../store/run-store.js";
import type { ConcurrencyInfo, Definition } from "../../workflow/definition.js";

/**
 * Every slot of the run's key is held: the run was stepped aside (suspended
 * and due). Thrown by {@link takeSlot}; `runOnce` answers it as a key in
 * progress and the background services skip the run. Never reaches a caller.
 */
class OverLimit extends Error {
  constructor(readonly retryAfterMs: number) {
    super("every concurrency slot of the run's key is held");
  }
}

/**
 * The slots a run of `def` needs, or undefined for a workflow without
 * `.concurrency`. Computed from the run alone, so every attempt asks for
 * the same key.
 *
 * @throws WorkflowDefinitionError when the key function answers anything but a string of 1-255 UTF-8 bytes.
 * @throws whatever the key function throws.
 */
export function slotFor(def: Definition, info: ConcurrencyInfo<unknown>): SlotRequest | undefined {
  const limit = def.options.concurrency;
  if (!limit) return undefined;
  const key: unknown = limit.key(info);
  if (typeof key !== "string" || key.length === 0 || Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) {
    throw new WorkflowDefinitionError(
      `workflow '${def.name}': the concurrency key must be a string of 1 to ${MAX_KEY_BYTES} UTF-8 bytes, got ${
        typeof key === "string" ? `${Buffer.byteLength(key, "utf8")} bytes` : typeof key
      }`,
    );
  }
  // Keys of different workflows never share slots.
  return { limitKey: `${def.name}\u001f${key}`, max: limit.max };
}

/**
 * Take a slot of `slot` for the attempt `own`, which has just taken its run.
 *
 * @throws OverLimit when every slot is held (the run was stepped aside).
 * @throws LeaseLostError when the attempt no longer owns the run.
 */
export async function takeSlot(
  db: Executor,
  t: Tables,
  own: Omit<Ownership, "runId">,
  slot: SlotRequest,
): Promise<void> {
  const answer = await acquireSlot(db, t, own, slot);
  if (answer.kind === "full") throw new OverLimit(answer.retryAfterMs);
  if (answer.kind === "lost") throw new LeaseLostError(own.tenantId, own.key, "taking a concurrency slot");
}

/** `work`, or null when the run turned out to be over its limit (a background service moves on). */
export async function unlessOverLimit<T>(work: Promise<T>): Promise<T | null> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof OverLimit) return null;
    throw error;
  }
}

/** `work`, or the ms to wait when the run turned out to be over its limit (`runOnce` waits or answers 409). */
export async function retryAfterOverLimit<T>(work: Promise<T>): Promise<T | number> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof OverLimit) return error.retryAfterMs;
    throw error;
  }
}
