/** Times as operators read them: ISO 8601 in UTC, and how far from the database clock's `now`. */
import { formatDuration } from "./duration.js";

/** ISO 8601 in UTC without milliseconds: what operators paste into log searches. */
export function iso(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** How long until `date`, on the database clock `now` (negative: that long ago). */
export function msUntil(date: Date, now: Date): number {
  return date.getTime() - now.getTime();
}

/** `in 5m at 2026-12-01T10:05:00Z`, or `5m ago at …` for a time passed. */
export function whenLabel(date: Date, now: Date): string {
  const ms = msUntil(date, now);
  return ms > 0 ? `in ${formatDuration(ms)} at ${iso(date)}` : `${formatDuration(ms)} ago at ${iso(date)}`;
}

/** When a suspended run wakes: `in 5m at …`, or `due for 3s, since …` once the time has passed. */
export function wakeTime(date: Date, now: Date): string {
  const ms = msUntil(date, now);
  return ms > 0 ? `in ${formatDuration(ms)} at ${iso(date)}` : `due for ${formatDuration(ms)}, since ${iso(date)}`;
}

/** {@link wakeTime} as a phrase: `wakes in 5m at …`, or `due for 3s, since …`. */
export function wakeLabel(date: Date, now: Date): string {
  return msUntil(date, now) > 0 ? `wakes ${wakeTime(date, now)}` : wakeTime(date, now);
}
