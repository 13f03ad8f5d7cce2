/**
 * Concurrency slots (migration 0018): a limit of how many attempts with one
 * key execute at once, shared by every process on the database. A slot is
 * held while the run it names is in flight under the owner token that took
 * it and under a lease that has not run out, so it has two states with one
 * transition each: free to held (`acquireSlot`, after the attempt took its
 * run), held kept held (`renewSlotLease`, the holder's heartbeat). Held
 * becomes free without a statement: completing, suspending, releasing, a
 * takeover (a new owner token) or a lease that runs out (a killed process).
 */
import type { Executor, Ownership, Tables } from "./run-store.js";

/** The attempt a slot is for. */
type Attempt = Omit<Ownership, "runId">;

/** What an attempt asks for: `max` slots of `limitKey`. */
export interface SlotRequest {
  /** The workflow's name and its `.concurrency` key, joined by U+001F. */
  readonly limitKey: string;
  readonly max: number;
}

/**
 * A slot taken (`acquired`), or the run no longer the attempt's (`lost`);
 * or every slot held (`full`), with the run stepped aside until one frees.
 */
export type SlotAnswer =
  | { readonly kind: "acquired" | "lost" }
  | { readonly kind: "full"; readonly retryAfterMs: number };

/**
 * Take a free slot of `req.limitKey` for the attempt `own` that has just
 * taken its run (claim, takeover or due take), in one statement; with every
 * slot held, the same statement steps the run aside: suspended and due, no
 * owner, keeping its place in wake-up order, for a worker or a retry to take
 * when a slot frees. `retryAfterMs` is the time until the first holder's
 * lease ends (DB clock), an upper bound on the wait when no holder completes.
 *
 * Races closed: (1) two attempts taking the last free slot: a slot row is
 * locked with SKIP LOCKED before its holder is read, so one locks it and the
 * other moves on to the next or finds none. (2) A taker against the
 * holder's renewal: the renewal locks the same row (`renewSlotLease`), so
 * either the taker finds it locked (held) or the renewal finds the slot
 * taken and fails. The holder's state is read in a statement after the lock,
 * which under READ COMMITTED sees every commit made before it.
 */
export async function acquireSlot(db: Executor, t: Tables, own: Attempt, req: SlotRequest): Promise<SlotAnswer> {
  // The statement is the function acquire_concurrency_slot of migration 0018.
  const rows = await t.calls.call<{ outcome: "acquired" | "full" | "lost"; retry_after_ms: number | null }>(
    db,
    "acquire_concurrency_slot",
    [own.tenantId, own.key, own.ownerToken, req.limitKey, req.max],
  );
  const row = rows[0];
  if (row?.outcome === "full") return { kind: "full", retryAfterMs: row.retry_after_ms ?? 1 };
  return { kind: row?.outcome === "acquired" ? "acquired" : "lost" };
}

/**
 * The heartbeat of an attempt that holds a slot of `limitKey`: the lease
 * extended (as `renewLease`) only while the slot is still its own.
 *
 * Race closed: a holder paused past its lease (a long GC, a frozen VM)
 * whose slot another attempt took meanwhile. Its renewal finds the slot
 * taken and fails, so the attempt learns it must stop (its signal aborts)
 * instead of running on beside the new holder.
 *
 * @returns false when the attempt no longer owns the key or its slot.
 */
export async function renewSlotLease(
  db: Executor,
  t: Tables,
  own: Attempt,
  leaseMs: number,
  limitKey: string,
): Promise<boolean> {
  // The statement is the function renew_slot_lease of migration 0018.
  const rows = await t.calls.call<{ ok: boolean }>(db, "renew_slot_lease", [
    own.tenantId,
    own.key,
    own.ownerToken,
    leaseMs,
    limitKey,
  ]);
  return rows[0]?.ok === true;
}
