/** The fan-out scenario's options, its report, its verdict and its one line. */
import type { FanoutMode } from "../workflows/fan-out.ts";

/** How big a fan-out run is; every number bounds work, none is a duration budget. */
export interface FanoutOptions {
  /** Maintenance URL of the server; the scenario makes (and drops) its own database there. */
  readonly serverUrl: string;
  /** Parent runs (payout batches) enqueued, spread over the limits 1-3, two merchants and two tenants. */
  readonly parents: number;
  /** Children (transfers) of each parent. */
  readonly transfers: number;
  /** Worker processes running `startWorker` at any time. */
  readonly workers: number;
  /** SIGKILLs of one worker (each replaced at once) due while the parents fan out: branches called, children created. */
  readonly fanOutKills: number;
  /** SIGKILLs of one worker due while the children complete and the parents collect them. */
  readonly fanInKills: number;
  /** Lease of every run, in ms; a killed worker's runs (and slots) are free again after it. */
  readonly leaseMs: number;
  /** `map`: the parents start their children with `.map`; `enqueue`: the driver enqueues them with their parent. */
  readonly mode: FanoutMode;
  readonly seed: number;
  readonly log: (line: string) => void;
  /** Keep the database afterwards even when every check passed. */
  readonly keepDatabase?: boolean;
}

/** The most attempts seen at once under one limit key, against its `max`. */
export interface LimitPeak {
  readonly limitKey: string;
  readonly max: number;
  /** The most live slot holders the sampler read in the slot table. */
  readonly slots: number;
  /** The most runs it read executing workflow code under the key with a live lease. */
  readonly executing: number;
}

/** What the fan-out scenario found. */
export interface FanoutReport {
  readonly mode: FanoutMode;
  readonly parents: number;
  /** Child runs found, over every parent (must be `parents * transfers`). */
  readonly children: number;
  /** Worker processes SIGKILLed (and replaced), by when they were due. */
  readonly kills: { readonly fanOut: number; readonly fanIn: number };
  /** Attempts after the first over all runs: takeovers of a killed worker's run, slot waits resumed. */
  readonly takeovers: number;
  /** Samples the limit sampler took while the scenario ran. */
  readonly samples: number;
  /** Per limit key, the most seen at once. */
  readonly peaks: readonly LimitPeak[];
  /** Limit keys whose peak, in either reading, went over their `max`. Must be 0. */
  readonly limitsExceeded: number;
  /** Calls of the rate-limited steps that reached the provider. */
  readonly rateLimitedCalls: number;
  /** The most calls any stretch of time had beyond what the bucket allows over it (burst and rate), slack included; must be <= 0. */
  readonly rateExcess: number;
  /** Provider calls, all steps, repeats included, and operations made. */
  readonly providerCalls: number;
  readonly providerOperations: number;
  /** Ledger rows, provider operations or children beyond one each. Must be 0. */
  readonly duplicateEffects: number;
  /** Parents or children not completed as expected, or with an effect, operation or child missing. Must be 0. */
  readonly lostIntents: number;
  /** Anything else broken: a wrong derived key, a response that disagrees, a second enqueue that created a run. Must be 0. */
  readonly otherViolations: number;
  readonly problems: readonly string[];
  readonly seconds: number;
}

/** True when no limit was exceeded and nothing was duplicated, lost or otherwise broken. */
export function fanoutPassed(r: FanoutReport): boolean {
  return (
    r.limitsExceeded === 0 &&
    r.rateExcess <= 0 &&
    r.duplicateEffects === 0 &&
    r.lostIntents === 0 &&
    r.otherViolations === 0
  );
}

/** The one line the scenario prints. */
export function fanoutSummaryLine(r: FanoutReport): string {
  const peaks = r.peaks.map((p) => `${p.limitKey.replace("\u001f", ":")} ${p.slots}/${p.executing} of ${p.max}`);
  return (
    `fan-out (${r.mode}): parents ${r.parents}, children ${r.children}, worker kills ${r.kills.fanOut} in fan-out ` +
    `and ${r.kills.fanIn} in fan-in, takeovers ${r.takeovers}, limit samples ${r.samples}, limits exceeded ` +
    `${r.limitsExceeded} (most at once, slots/executing: ${peaks.join(", ")}), rate-limited calls ` +
    `${r.rateLimitedCalls} (excess over the bucket ${r.rateExcess.toFixed(1)}), provider ${r.providerCalls} calls ` +
    `${r.providerOperations} operations, duplicate effects ${r.duplicateEffects}, lost intents ${r.lostIntents} ` +
    `(other violations ${r.otherViolations}, ${r.seconds} s)`
  );
}
