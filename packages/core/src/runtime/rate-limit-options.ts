/**
 * `createEngine({ rateLimits })`: the token buckets an engine's steps may
 * name, checked once when the engine is made, and the check that every
 * step's `rateLimit` names one of them, made when the engine is first given
 * a workflow.
 */
import { InvalidOptionError, WorkflowDefinitionError } from "../errors.js";
import { RATE_LIMIT_OPTIONS } from "../options/known-options.js";
import { intOption } from "../options/option-checks.js";
import { checkOptions } from "../options/option-shape.js";
import type { Bucket } from "../store/rate-limits.js";
import type { Definition } from "../workflow/definition.js";

/**
 * One rate limit: a token bucket shared by every process on the database
 * through one row, refilled on the database clock. Give exactly one of
 * `perSecond` and `perMinute`.
 */
export interface RateLimitOptions {
  /** Tokens earned per second, 1-1 000 000. */
  perSecond?: number;
  /** Tokens earned per minute, 1-60 000 000. */
  perMinute?: number;
  /**
   * Most tokens stored, so most calls at once after a quiet spell, 1-1 000 000
   * (Default: 1: calls are spaced evenly, never two within one token's time).
   */
  burst?: number;
}

/** A limit name: what the bucket's row is named by in the database. */
const NAME = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The buckets of `createEngine`'s `rateLimits`, by name.
 *
 * @throws InvalidOptionError on a name that is not 1-128 letters, digits, `.`, `_` or `-`, an entry that is not
 *   an object or holds an unknown option, none or both of `perSecond` and `perMinute`, or a value out of range.
 */
export function rateLimitsOf(where: string, limits: unknown): Map<string, Bucket> {
  const buckets = new Map<string, Bucket>();
  if (limits === undefined) return buckets;
  for (const [name, entry] of Object.entries(limits as Record<string, unknown>)) {
    const at = `${where}: rateLimits.${name}`;
    if (!NAME.test(name)) {
      throw new InvalidOptionError(
        "rateLimits",
        `${where}: rate limit name ${JSON.stringify(name)} must be 1-128 letters, digits, '.', '_' or '-'`,
      );
    }
    checkOptions(at, RATE_LIMIT_OPTIONS, entry, "the rate limit");
    const o = (entry ?? {}) as RateLimitOptions;
    if ((o.perSecond === undefined) === (o.perMinute === undefined)) {
      throw new InvalidOptionError("rateLimits", `${at}: give exactly one of perSecond and perMinute`);
    }
    const perSecond = intOption(at, "perSecond", o.perSecond, 1, 1_000_000);
    const perMinute = intOption(at, "perMinute", o.perMinute, 1, 60_000_000);
    const burst = intOption(at, "burst", o.burst, 1, 1_000_000, 1);
    const perMs = perSecond !== undefined ? perSecond / 1_000 : (perMinute as number) / 60_000;
    buckets.set(name, Object.freeze({ name, perMs, burst }));
  }
  return buckets;
}

/**
 * @throws WorkflowDefinitionError when a step of `def` names a rate limit that is not among `buckets`.
 */
export function checkRateLimitNames(def: Definition, buckets: ReadonlyMap<string, Bucket>): void {
  for (const item of def.items) {
    const name = item.kind === "step" ? item.options.rateLimit : undefined;
    if (name !== undefined && !buckets.has(name)) {
      const known = [...buckets.keys()].sort().join(", ") || "none";
      throw new WorkflowDefinitionError(
        `workflow '${def.name}', step '${item.name}': rateLimit '${name}' is not a rate limit of this engine ` +
          `(createEngine's rateLimits: ${known})`,
      );
    }
  }
}
