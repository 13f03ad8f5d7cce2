/**
 * The statements of the test clock: every instant the engine stores, moved
 * back together, and the next instant at which something becomes due.
 * Moving every stored instant of one schema back by d is, for each
 * decision the engine makes by comparing them with the database clock, the
 * same as that clock having moved forward by d; the server's clock itself
 * is never touched, and other schemas on the server see nothing.
 */
import type { ClockAccess, ClockStatements } from "@idempo/core/internal";

/**
 * Every `timestamptz` column of the engine's tables, by table (the
 * migrations' `schema_migrations.applied_at` aside: nothing compares it with
 * the time). A test compares this list with the schema.
 */
export const INSTANT_COLUMNS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  runs: [
    "locked_until",
    "expires_at",
    "created_at",
    "updated_at",
    "completed_at",
    "parked_at",
    "wake_at",
    "wait_until",
  ],
  run_history: ["started_at", "finished_at"],
  signals: ["created_at"],
  tombstones: ["completed_at", "expired_at", "kept_until"],
  outbox: ["available_at", "locked_until", "created_at", "delivered_at"],
  schedules: ["next_tick_at", "last_tick_at", "last_fired_at", "created_at", "updated_at"],
  // A bucket refilled longer ago holds more tokens: moved back, the time moved forward for it too.
  rate_limits: ["refilled_at"],
  // Only shown, never compared; moved so that it stays before the runs a registered version starts.
  workflow_versions: ["registered_at"],
});

type Db = ClockStatements;

/** A quoted, dotted SQL name: `"idempo"."runs"` (the schema is a plain identifier, checked by `createEngine`). */
function id(...names: string[]): string {
  return names.map((n) => `"${n.replaceAll('"', '""')}"`).join(".");
}

/** Move every stored instant of `schema` back by `ms`, in one transaction. */
export async function shiftInstants(
  access: Pick<ClockAccess, "inTransaction">,
  schema: string,
  ms: number,
): Promise<void> {
  if (ms === 0) return;
  await access.inTransaction(async (tx) => {
    for (const [table, columns] of Object.entries(INSTANT_COLUMNS)) {
      const sets = columns.map((c) => `${id(c)} = ${id(c)} - make_interval(secs => $1)`);
      await tx.query(`UPDATE ${id(schema, table)} SET ${sets.join(", ")}`, [ms / 1000]);
    }
  });
}

/**
 * Ms from now (database clock) to the earliest instant still to come at
 * which the engine would act: a suspended run's wake-up (a sleep's end, a
 * wait's timeout), an in-flight run's lease end, a pending outbox message's
 * next delivery, an unpaused schedule's next tick. Null when none is to come.
 */
export async function msToNextInstant(db: Db, schema: string): Promise<number | null> {
  const t = (table: string) => id(schema, table);
  const rows = await db.query<{ ms: number | null }>(
    `
    SELECT ceil(extract(epoch FROM (min(at) - now())) * 1000)::float8 AS ms FROM (
      SELECT wake_at AS at FROM ${t("runs")} WHERE status = 'suspended' AND wake_at > now()
      UNION ALL SELECT locked_until FROM ${t("runs")} WHERE status = 'in_flight' AND locked_until > now()
      UNION ALL SELECT available_at FROM ${t("outbox")} WHERE status = 'pending' AND available_at > now()
      UNION ALL SELECT next_tick_at FROM ${t("schedules")} WHERE NOT paused AND next_tick_at > now()
    ) AS instants`,
    [],
  );
  return rows[0]?.ms ?? null;
}

/** The database clock. */
export async function databaseNow(db: Db): Promise<Date> {
  const rows = await db.query<{ now: Date }>("SELECT now() AS now", []);
  return (rows[0] as { now: Date }).now;
}

/** A row of `schedules` as the clock aligns it. */
export interface ScheduleTime {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  readonly nextTickAt: Date;
  /** Whether the tick is due now (database clock). */
  readonly due: boolean;
}

/** Every unpaused schedule with a next tick. */
export async function scheduleTimes(db: Db, schema: string): Promise<ScheduleTime[]> {
  const rows = await db.query<{ name: string; cron: string; timezone: string; next_tick_at: Date; due: boolean }>(
    `SELECT name, cron, timezone, next_tick_at, next_tick_at <= now() AS due FROM ${id(schema, "schedules")}
    WHERE NOT paused AND next_tick_at IS NOT NULL`,
    [],
  );
  return rows.map((r) => ({
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    nextTickAt: r.next_tick_at,
    due: r.due,
  }));
}

/** Set a schedule's next tick, unless the row moved on meanwhile (it no longer holds `was`). */
export async function moveNextTick(db: Db, schema: string, name: string, was: Date, next: Date | null): Promise<void> {
  await db.query(
    `UPDATE ${id(schema, "schedules")} SET next_tick_at = $1::timestamptz WHERE name = $2 AND next_tick_at = $3::timestamptz`,
    [next, name, was],
  );
}
