/**
 * Schedules (migration 0016): one row per schedule, holding the first tick
 * not yet fired. A row moves through its ticks only by `recordFiring`, in
 * the transaction that locked it (`lockDueSchedule`) and started the runs
 * of the ticks it fired, so a tick is either fired with its runs or not at
 * all. The cron arithmetic is the caller's; every comparison with the time
 * uses the database clock.
 */
import { storableText } from "./progress.js";
import type { Executor, Tables } from "./run-store.js";
import { sql } from "./sql.js";

export type CatchUpMode = "none" | "latest" | "all";

/** A row of `schedules`. */
export interface ScheduleRow {
  name: string;
  tenant_id: string;
  workflow: string;
  cron: string;
  timezone: string;
  catch_up: CatchUpMode;
  grace_ms: number;
  has_input: boolean;
  paused: boolean;
  next_tick_at: Date | null;
  last_tick_at: Date | null;
  last_fired_at: Date | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

/** What `schedule()` writes; `next_tick_at` is the first tick after `now()` under this cron and zone. */
export type ScheduleWrite = Pick<
  ScheduleRow,
  "name" | "tenant_id" | "workflow" | "cron" | "timezone" | "catch_up" | "grace_ms" | "has_input" | "next_tick_at"
>;

/** The database clock, for tick arithmetic done in the engine. */
export async function databaseNow(db: Executor): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  return (rows[0] as { now: Date }).now;
}

/**
 * Create or change a schedule. A change of cron or time zone starts from
 * the new definition's next tick (`w.next_tick_at`); any other change (the
 * workflow, tenant, catch-up, input) keeps the row's place in time, so that
 * every process calling `schedule()` with the same definition at start-up
 * neither skips nor repeats a tick. `paused` is an operator's and stays.
 * Two concurrent writers serialise on the row (ON CONFLICT); the last wins.
 */
export async function upsertSchedule(db: Executor, t: Tables, w: ScheduleWrite): Promise<ScheduleRow> {
  const { rows } = await sql<ScheduleRow>`
    INSERT INTO ${t.schedules} AS s
      (name, tenant_id, workflow, cron, timezone, catch_up, grace_ms, has_input, next_tick_at)
    VALUES (${w.name}, ${w.tenant_id}, ${w.workflow}, ${w.cron}, ${w.timezone}, ${w.catch_up}, ${w.grace_ms},
            ${w.has_input}, ${w.next_tick_at})
    ON CONFLICT (name) DO UPDATE SET
      tenant_id = excluded.tenant_id,
      workflow = excluded.workflow,
      catch_up = excluded.catch_up,
      grace_ms = excluded.grace_ms,
      has_input = excluded.has_input,
      next_tick_at = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone
                          THEN s.next_tick_at ELSE excluded.next_tick_at END,
      cron = excluded.cron,
      timezone = excluded.timezone,
      updated_at = now()
    RETURNING s.*`.execute(db);
  return rows[0] as ScheduleRow;
}

/** Delete a schedule; true when it existed. A firing round holding its row finishes first (the row lock). */
export async function deleteSchedule(db: Executor, t: Tables, name: string): Promise<boolean> {
  const { rows } = await sql`DELETE FROM ${t.schedules} WHERE name = ${name} RETURNING 1`.execute(db);
  return rows.length > 0;
}

/** Every schedule, by name. */
export async function selectSchedules(db: Executor, t: Tables): Promise<ScheduleRow[]> {
  const { rows } = await sql<ScheduleRow>`SELECT * FROM ${t.schedules} ORDER BY name`.execute(db);
  return rows;
}

/** One schedule, locked for the rest of `tx` (pause and resume read its cron and write it back). */
export async function lockSchedule(tx: Executor, t: Tables, name: string): Promise<ScheduleRow | null> {
  const { rows } = await sql<ScheduleRow>`SELECT * FROM ${t.schedules} WHERE name = ${name} FOR UPDATE`.execute(tx);
  return rows[0] ?? null;
}

/** Set `paused`, and the next tick when given (a resume skips the ticks of the pause). */
export async function setPaused(
  tx: Executor,
  t: Tables,
  name: string,
  paused: boolean,
  nextTickAt: Date | null | undefined,
): Promise<ScheduleRow> {
  const next = nextTickAt === undefined ? sql`next_tick_at` : sql`${nextTickAt}::timestamptz`;
  const { rows } = await sql<ScheduleRow>`
    UPDATE ${t.schedules} SET paused = ${paused}, next_tick_at = ${next}, updated_at = now()
    WHERE name = ${name} RETURNING *`.execute(tx);
  return rows[0] as ScheduleRow;
}

/**
 * The schedules one worker may fire: those registered in its process
 * (by name and workflow; one whose row says the input comes from a
 * function only when the process has that function), and those without an
 * input function whose workflow it runs.
 */
export interface FiringFilter {
  readonly registered: readonly { name: string; workflow: string; hasInput: boolean }[];
  readonly workflows: readonly string[];
}

function fireable(f: FiringFilter) {
  const names = f.registered.map((r) => r.name);
  const workflows = f.registered.map((r) => r.workflow);
  const inputs = f.registered.map((r) => r.hasInput);
  return sql`(
    EXISTS (SELECT 1 FROM unnest(${names}::text[], ${workflows}::text[], ${inputs}::boolean[]) AS r (name, workflow, has_input)
            WHERE r.name = s.name AND r.workflow = s.workflow AND (r.has_input OR NOT s.has_input))
    OR (NOT s.has_input AND s.workflow = ANY(${f.workflows}::text[])))`;
}

/**
 * The due schedules a worker may fire, earliest tick first. Read without
 * locks from the partial index on `next_tick_at`; each is then locked on
 * its own by {@link lockDueSchedule}.
 */
export async function selectDueSchedules(
  db: Executor,
  t: Tables,
  filter: FiringFilter,
  limit: number,
): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT name FROM ${t.schedules} AS s
    WHERE NOT paused AND next_tick_at <= now() AND ${fireable(filter)}
    ORDER BY next_tick_at
    LIMIT ${limit}`.execute(db);
  return rows.map((r) => r.name);
}

/** Ms from now (DB clock) to the earliest next tick among the schedules a worker may fire; null when none. */
export async function msUntilNextTick(db: Executor, t: Tables, filter: FiringFilter): Promise<number | null> {
  const { rows } = await sql<{ ms: number | null }>`
    SELECT (extract(epoch FROM min(next_tick_at) - now()) * 1000)::float8 AS ms FROM ${t.schedules} AS s
    WHERE NOT paused AND next_tick_at IS NOT NULL AND ${fireable(filter)}`.execute(db);
  return rows[0]?.ms ?? null;
}

/**
 * Lock one due schedule for the rest of `tx`, with the transaction's time.
 * SKIP LOCKED: a worker never waits for another that is firing it, and the
 * second of two that read it due finds it locked or, after the first
 * committed, no longer due; so each tick is looked at by one worker at a time.
 */
export async function lockDueSchedule(
  tx: Executor,
  t: Tables,
  name: string,
): Promise<(ScheduleRow & { now: Date }) | null> {
  const { rows } = await sql<ScheduleRow & { now: Date }>`
    SELECT *, now() AS now FROM ${t.schedules}
    WHERE name = ${name} AND NOT paused AND next_tick_at <= now()
    FOR UPDATE SKIP LOCKED`.execute(tx);
  return rows[0] ?? null;
}

/** What a firing round moves the locked row to. */
export interface Firing {
  readonly nextTickAt: Date | null;
  /** The last tick a run was started for in this round, or null when none was. */
  readonly lastTickAt: Date | null;
  /** Why a tick of this round could not start its run; null when every one did. */
  readonly error: string | null;
}

/** Move the row locked by {@link lockDueSchedule} past the ticks just fired or skipped. */
export async function recordFiring(tx: Executor, t: Tables, name: string, f: Firing): Promise<void> {
  const fired = f.lastTickAt !== null;
  // An error message may hold a NUL, which a text column refuses: the whole round would roll back, every round.
  const error = f.error === null ? null : storableText(f.error);
  await sql`
    UPDATE ${t.schedules} SET
      next_tick_at = ${f.nextTickAt}::timestamptz,
      last_tick_at = CASE WHEN ${fired} THEN ${f.lastTickAt}::timestamptz ELSE last_tick_at END,
      last_fired_at = CASE WHEN ${fired} THEN now() ELSE last_fired_at END,
      last_error = CASE WHEN ${fired} OR ${error}::text IS NOT NULL THEN ${error}::text ELSE last_error END
    WHERE name = ${name}`.execute(tx);
}
