/**
 * A schedule's ticks: the instants its cron expression names in its time
 * zone, and which of the due ones a firing round starts runs for. The cron
 * grammar and the time-zone arithmetic (daylight-saving gaps and repeated
 * hours) are croner's; this file only decides what to do with the ticks it
 * computes, so that every worker, in every process, computes the same ones.
 */
import { Cron } from "croner";
import { InvalidOptionError } from "../../errors.js";
import type { CatchUpMode } from "../../store/schedules.js";

/** Ticks one firing round starts at most for one schedule; the rest wait for the next round. */
export const TICKS_PER_ROUND = 100;
/** With `catchUp: 'all'`, the most missed ticks fired after an outage; older ones are skipped. */
export const MAX_CAUGHT_UP = 1_000;

/**
 * The croner object for an expression and a canonical zone. Five fields
 * (minute precision) or six (seconds first); croner's nicknames (`@daily`)
 * too. Never the process's own zone: the zone is always given.
 *
 * @throws InvalidOptionError (`cron`) when croner refuses the expression or it names no future tick;
 *   (`timezone`) when the runtime does not know the zone (one stored by a process with a newer zone database).
 */
export function cronOf(where: string, cron: unknown, timezone: string): Cron {
  if (typeof cron !== "string" || cron.trim() === "") {
    throw new InvalidOptionError(
      "cron",
      `${where}: cron must be a cron expression such as '0 3 * * *', got ${String(cron)}`,
    );
  }
  let rule: Cron;
  try {
    rule = new Cron(cron, { timezone, mode: "5-or-6-parts" });
  } catch (error) {
    throw new InvalidOptionError(
      "cron",
      `${where}: cron '${cron}' is not a cron expression of 5 fields (minute hour day month weekday) or 6 ` +
        `(with seconds first): ${(error as Error).message}`,
    );
  }
  let first: Date | null;
  try {
    first = rule.nextRun();
  } catch (error) {
    // croner reads the zone only when it computes a time: a zone stored by a process whose runtime knew it.
    throw new InvalidOptionError(
      "timezone",
      `${where}: timezone '${timezone}' is not an IANA time zone this runtime knows: ${(error as Error).message}`,
    );
  }
  if (first === null) {
    throw new InvalidOptionError("cron", `${where}: cron '${cron}' names no future time (a date that never comes?)`);
  }
  return rule;
}

/**
 * The IANA zone's canonical name (`utc` -> `UTC`), as the runtime's time-zone
 * database knows it.
 *
 * @throws InvalidOptionError (`timezone`) for a zone the runtime does not know.
 */
export function canonicalZone(where: string, timezone: unknown): string {
  if (typeof timezone !== "string" || timezone === "") {
    throw new InvalidOptionError(
      "timezone",
      `${where}: timezone must be an IANA time zone name such as 'Europe/Berlin'`,
    );
  }
  try {
    return new Intl.DateTimeFormat("en", { timeZone: timezone }).resolvedOptions().timeZone;
  } catch {
    throw new InvalidOptionError(
      "timezone",
      `${where}: timezone '${timezone}' is not an IANA time zone this runtime knows (such as 'Europe/Berlin' or 'UTC')`,
    );
  }
}

/** Where a schedule stands when a round looks at it (DB clock). */
export interface TickState {
  /** The first tick not yet fired or skipped. */
  readonly next: Date;
  readonly now: Date;
  readonly graceMs: number;
  readonly catchUp: CatchUpMode;
}

/** What a round does: start runs for `fire` (oldest first), then wait for `next`. */
export interface TickPlan {
  readonly fire: readonly Date[];
  readonly next: Date | null;
}

/**
 * The ticks to fire now. A due tick is on time while `now - tick <=
 * graceMs`, and missed once it is older (no worker fired it in time: all
 * were stopped, or busy). On-time ticks are always fired. Missed ones follow
 * `catchUp`: `none` skips them, `latest` fires the most recent of them as
 * one run, `all` fires each (at most the {@link MAX_CAUGHT_UP} most recent).
 * At most {@link TICKS_PER_ROUND} are fired per round; `next` is then the
 * tick after the last fired one, so the next round goes on from there.
 */
export function planTicks(rule: Cron, s: TickState): TickPlan {
  const lateBefore = new Date(s.now.getTime() - s.graceMs);
  const missed = s.catchUp === "none" ? [] : missedTicks(rule, s.next, lateBefore);
  const fire = s.catchUp === "all" ? missed : missed.slice(-1);
  let t: Date | null = s.next >= lateBefore ? s.next : rule.nextRun(new Date(lateBefore.getTime() - 1));
  while (t !== null && t <= s.now && fire.length <= TICKS_PER_ROUND) {
    fire.push(t);
    t = rule.nextRun(t);
  }
  if (fire.length > TICKS_PER_ROUND) {
    const batch = fire.slice(0, TICKS_PER_ROUND);
    return { fire: batch, next: rule.nextRun(batch[batch.length - 1] as Date) };
  }
  return { fire, next: rule.nextRun(s.now) };
}

/** The missed ticks in `[from, lateBefore)`, oldest first: the {@link MAX_CAUGHT_UP} most recent of them. */
function missedTicks(rule: Cron, from: Date, lateBefore: Date): Date[] {
  const missed: Date[] = [];
  let t: Date | null = from;
  while (t !== null && t < lateBefore && missed.length <= MAX_CAUGHT_UP) {
    missed.push(t);
    t = rule.nextRun(t);
  }
  if (missed.length <= MAX_CAUGHT_UP) return missed;
  // A long outage: start from the oldest of the most recent ones instead of walking through all of them.
  const recent = rule.previousRuns(MAX_CAUGHT_UP, lateBefore);
  const oldest = recent[recent.length - 1] as Date;
  const kept: Date[] = [];
  for (let u: Date | null = oldest; u !== null && u < lateBefore; u = rule.nextRun(u)) kept.push(u);
  return kept;
}
