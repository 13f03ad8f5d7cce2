/** The human table of keys that `keys list` prints. */
import type { RunRecord } from "@idempo/core";
import type { Paint } from "./colour.js";
import type { SuspensionFacts } from "./diagnosis.js";
import { formatDuration, formatLease } from "./duration.js";
import type { Column, Row } from "./table.js";
import { renderTable } from "./table.js";
import { iso, wakeLabel } from "./times.js";
import { visible } from "./visible.js";

/** `stuck`, `in flight`, `parked`, `suspended`, `completed` or `expired` (completed past retention), coloured. */
export function statusLabel(record: RunRecord, paint: Paint): string {
  if (record.status === "parked") return paint("red", "parked");
  if (record.status === "suspended") return paint("yellow", "suspended");
  if (record.status === "completed") return record.expired ? paint("dim", "expired") : paint("green", "completed");
  return (record.leaseRemainingMs ?? 0) > 0 ? paint("yellow", "in flight") : paint("red", "stuck");
}

/** Lease column: time left, time since it expired, or a dash once completed. */
export function leaseLabel(record: RunRecord): string {
  return record.leaseRemainingMs === null ? "-" : formatLease(record.leaseRemainingMs);
}

/** Age of a record on the database clock `now`. */
export function ageLabel(record: RunRecord, now: Date): string {
  return formatDuration(Math.max(0, now.getTime() - record.createdAt.getTime()));
}

/**
 * What a suspended run waits for, in a few words: `sleep cool_off`,
 * `signal confirmed`, `signal confirmed (arrived)`, or `a worker (enqueued)`.
 */
export function waitsForLabel(record: RunRecord, facts: SuspensionFacts = {}): string {
  const w = record.waitingFor;
  if (w === null) return "a worker (enqueued)";
  return `${w.kind} ${w.name}${facts.signalDelivered ? " (arrived)" : ""}`;
}

/** When a suspended run wakes, relative to the database clock `now`: `in 5m`, `due for 3s`, `on signal`. */
export function wakesLabel(record: RunRecord, now: Date): string {
  if (record.wakeAt === null) return "on signal";
  const ms = record.wakeAt.getTime() - now.getTime();
  return ms > 0 ? `in ${formatDuration(ms)}` : `due for ${formatDuration(ms)}`;
}

/** The note under a suspended row of a mixed listing: what it waits for and when it wakes, relative and absolute. */
function suspendedNote(record: RunRecord, now: Date, facts: SuspensionFacts, paint: Paint): string {
  const when = record.wakeAt === null ? "wakes on the signal (no timeout)" : wakeLabel(record.wakeAt, now);
  return `${paint("yellow", "↳")} waits for ${waitsForLabel(record, facts)}; ${when}`;
}

const COLUMNS: Column[] = [
  { header: "TENANT", shrink: true },
  { header: "KEY", shrink: true },
  { header: "WORKFLOW", shrink: true },
  { header: "STATUS" },
  { header: "RECOVERY POINT", shrink: true },
  { header: "ATTEMPTS", align: "right" },
  { header: "LEASE" },
  { header: "AGE", align: "right" },
];

const SUSPENDED_COLUMNS: Column[] = [
  { header: "TENANT", shrink: true },
  { header: "KEY", shrink: true },
  { header: "WORKFLOW", shrink: true },
  { header: "WAITS FOR", shrink: true },
  { header: "WAKES", align: "right" },
  { header: "WAKE-UP (UTC)" },
  { header: "AGE", align: "right" },
];

/**
 * Render records, newest first as given, as an aligned table within 100
 * columns; a suspended record is followed by a note saying what it waits
 * for and when it wakes. `facts` (by record, see `deliveredSignals`) says
 * which awaited signals have arrived.
 */
export function keyTable(
  records: readonly RunRecord[],
  now: Date,
  paint: Paint,
  facts: (record: RunRecord) => SuspensionFacts = () => ({}),
): string {
  const rows: Row[] = records.flatMap((r): Row[] => {
    const row: Row = [
      visible(r.tenantId),
      visible(r.key),
      r.workflow,
      statusLabel(r, paint),
      r.recoveryPoint ?? "-",
      String(r.attempt),
      leaseLabel(r),
      ageLabel(r, now),
    ];
    return r.status === "suspended" ? [row, { note: suspendedNote(r, now, facts(r), paint) }] : [row];
  });
  return renderTable(COLUMNS, rows, paint);
}

/**
 * The table of `keys list --status suspended`: what each run waits for and
 * when it wakes, relative (`in 5m`, `due for 3s`, `on signal`) and
 * absolute, on the database clock. (Attempts are in `--json`: resuming a
 * suspension is not an attempt, so they say little here.)
 */
export function suspendedTable(
  records: readonly RunRecord[],
  now: Date,
  paint: Paint,
  facts: (record: RunRecord) => SuspensionFacts = () => ({}),
): string {
  const rows: Row[] = records.map((r) => [
    visible(r.tenantId),
    visible(r.key),
    r.workflow,
    waitsForLabel(r, facts(r)),
    wakesLabel(r, now),
    r.wakeAt ? iso(r.wakeAt) : "-",
    ageLabel(r, now),
  ]);
  return renderTable(SUSPENDED_COLUMNS, rows, paint);
}
