/**
 * The check of a shared token bucket from the calls it let through: over
 * any stretch of time from one call to a later one, the calls may not
 * outnumber the bucket's burst plus what it earns over the stretch. The
 * calls are stamped when they reach the provider, a little after their
 * token was taken (the step's started marker, the work before the call),
 * so each stretch is granted `slackMs` more: a bucket per process instead
 * of one shared bucket still shows, as a multiple of the rate.
 */

/**
 * The most calls any stretch had beyond what the bucket allows over it.
 * @param times when each call arrived, in ms, in any order.
 * @returns at most 0 when the bucket held (the larger the gap, the more room was left).
 */
export function rateExcess(times: readonly number[], perSecond: number, burst: number, slackMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  const rate = perSecond / 1_000;
  // Calls i..j: (j - i + 1) - burst - rate * (t_j - t_i + slack); keep the best start seen so far.
  let best = Number.NEGATIVE_INFINITY;
  let bestStart = Number.POSITIVE_INFINITY;
  sorted.forEach((t, j) => {
    bestStart = Math.min(bestStart, j - rate * t);
    best = Math.max(best, j + 1 - rate * t - bestStart - burst - rate * slackMs);
  });
  return sorted.length === 0 ? 0 : best;
}
