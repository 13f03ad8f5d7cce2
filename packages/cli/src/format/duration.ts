/** Durations as operators type and read them: `90s`, `10m`, `1h30m`, `2d`. */

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parse a duration such as `500ms`, `90s`, `10m`, `1h30m` or `2d` into
 * milliseconds. A bare number is not accepted: the unit is what makes
 * `--older-than 10` unambiguous.
 *
 * @returns the duration in ms, or `undefined` when the text is not a duration.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(ms|s|m|h|d))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(/(\d+)(ms|s|m|h|d)/g)) {
    total += Number(amount) * (UNITS[unit as string] ?? 0);
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/**
 * Format milliseconds for people, with the two largest units:
 * `850ms`, `12s`, `14m`, `2h 5m`, `3d 4h`. Negative values format their magnitude.
 */
export function formatDuration(ms: number): string {
  const abs = Math.abs(Math.round(ms));
  if (abs < 1000) return `${abs}ms`;
  const s = Math.floor(abs / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 === 0 || m >= 10 ? `${m}m` : `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 === 0 ? `${h}h` : `${h}h ${m % 60}m`;
  const d = Math.floor(h / 24);
  return h % 24 === 0 ? `${d}d` : `${d}d ${h % 24}h`;
}

/** `25s left` for a live lease, `expired 14m ago` for a lapsed one (DB clock). */
export function formatLease(leaseRemainingMs: number): string {
  return leaseRemainingMs > 0
    ? `${formatDuration(leaseRemainingMs)} left`
    : `expired ${formatDuration(leaseRemainingMs)} ago`;
}
