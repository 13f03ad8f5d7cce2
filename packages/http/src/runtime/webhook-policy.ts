/**
 * Which refused signals a webhook route acknowledges. A provider retries
 * every answer that is not 2xx, often for days, so a signal that no retry
 * could ever deliver is acknowledged and reported to the application
 * instead: the run already ended (completed, canceled, timed out into its
 * stored answer) or is past retention (its record expired, or only its
 * tombstone is left). Everything a retry can still fix stays an error: a
 * payload that fails the wait's schema, a name the run does not wait for,
 * a conflicting payload, an absent key (the event may have raced ahead of
 * its run), a run that is still going but no longer waits for this signal,
 * a database that is down or not migrated.
 */
import type { Engine, IdempoError } from "@idempo/core";
import { RunNotFoundError, RunStateError } from "@idempo/core";

/**
 * Why a webhook's signal was acknowledged (2xx) without this request
 * delivering it: `duplicate`, the same signal was delivered before, nothing
 * is lost; `run_ended`, the run had completed (its answer is stored; it
 * will never read this signal); `run_expired`, the run is past retention.
 */
export type UndeliveredReason = "duplicate" | "run_ended" | "run_expired";

/**
 * The reason a refusal of `engine.signal` is acknowledged, or undefined
 * when it stays an error. An absent record is looked up once more: one
 * past retention but not swept yet is a run that ended.
 */
export async function acknowledgedRefusal(
  engine: Engine,
  target: { readonly tenantId: string; readonly key: string },
  error: IdempoError,
): Promise<Exclude<UndeliveredReason, "duplicate"> | undefined> {
  // A run that waits no more but is not completed (its onTimeout still runs, or it waits elsewhere) stays 409.
  if (error instanceof RunStateError && error.status === "completed") return "run_ended";
  // A record past retention without a tombstone (tombstoneMs 0), not swept yet. (A tombstoned run is no
  // error: `signal` acknowledges it with `expired: true`.)
  if (error instanceof RunNotFoundError) {
    const record = await engine.inspect(target.tenantId, target.key).catch(() => null);
    if (record?.expired === true) return "run_expired";
  }
  return undefined;
}
