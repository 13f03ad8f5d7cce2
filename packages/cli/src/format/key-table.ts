/** The human table of keys that `keys list` prints. */
import type { RunRecord } from "@idempo/core";
import type { Paint } from "./colour.js";
import { formatDuration, formatLease } from "./duration.js";
import type { Column, Row } from "./table.js";
import { renderTable } from "./table.js";
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

/** Render records, newest first as given, as an aligned table within 100 columns. */
export function keyTable(records: readonly RunRecord[], now: Date, paint: Paint): string {
  const rows: Row[] = records.map((r) => [
    visible(r.tenantId),
    visible(r.key),
    r.workflow,
    statusLabel(r, paint),
    r.recoveryPoint ?? "-",
    String(r.attempt),
    leaseLabel(r),
    ageLabel(r, now),
  ]);
  return renderTable(COLUMNS, rows, paint);
}
