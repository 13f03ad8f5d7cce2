/** Schedules as a table, as the lines of `schedules show`, and as JSON. */
import type { ScheduleRecord } from "@idempo/core";
import type { Paint } from "./colour.js";
import { formatDuration } from "./duration.js";
import type { Row } from "./table.js";
import { renderTable } from "./table.js";
import { iso, whenLabel } from "./times.js";
import { visible } from "./visible.js";

const isoOrNull = (d: Date | null) => (d ? d.toISOString() : null);

/** The `--json` shape of one schedule (times as ISO strings, null when unset). */
export function scheduleJson(s: ScheduleRecord): Record<string, unknown> {
  return {
    name: s.name,
    tenantId: s.tenantId,
    workflow: s.workflow,
    cron: s.cron,
    timezone: s.timezone,
    catchUp: s.catchUp,
    graceMs: s.graceMs,
    hasInput: s.hasInput,
    paused: s.paused,
    nextTickAt: isoOrNull(s.nextTickAt),
    lastTickAt: isoOrNull(s.lastTickAt),
    lastFiredAt: isoOrNull(s.lastFiredAt),
    lastError: s.lastError,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

function stateCell(s: ScheduleRecord, paint: Paint): string {
  if (s.paused) return paint("yellow", "paused");
  return s.lastError ? paint("red", "failing") : paint("green", "active");
}

/** What the next tick column says: paused schedules fire nothing, whatever their row holds. */
function nextCell(s: ScheduleRecord, now: Date): string {
  if (s.paused) return "-";
  return s.nextTickAt ? whenLabel(s.nextTickAt, now) : "never";
}

/** Render schedules by name; a schedule's last error goes on a line under it. */
export function scheduleTable(schedules: readonly ScheduleRecord[], now: Date, paint: Paint): string {
  const rows: Row[] = schedules.flatMap((s): Row[] => {
    const row: Row = [
      s.name,
      visible(s.tenantId),
      s.workflow,
      visible(s.cron),
      s.timezone,
      stateCell(s, paint),
      nextCell(s, now),
    ];
    return s.lastError ? [row, { note: paint("red", `last error: ${visible(s.lastError)}`) }] : [row];
  });
  return renderTable(
    [
      // Never cut: `idempo schedules show NAME` needs it whole.
      { header: "NAME" },
      { header: "TENANT", shrink: true },
      { header: "WORKFLOW", shrink: true },
      { header: "CRON", shrink: true },
      { header: "ZONE", shrink: true },
      { header: "STATE" },
      { header: "NEXT TICK (UTC)", shrink: true },
    ],
    rows,
    paint,
  );
}

/** The lines of `schedules show`: one field a line, times with how far they are from `now`. */
export function scheduleDetail(s: ScheduleRecord, now: Date, paint: Paint): string {
  const at = (d: Date | null) => (d ? whenLabel(d, now) : "-");
  const fields: [string, string][] = [
    ["schedule", s.name],
    ["state", stateCell(s, paint)],
    ["tenant", visible(s.tenantId)],
    ["workflow", s.workflow],
    ["cron", `${visible(s.cron)} (${s.timezone})`],
    ["catch-up", `${s.catchUp}; a tick is missed once ${formatDuration(s.graceMs)} late`],
    ["input", s.hasInput ? "from the function given to schedule() (fired by its processes only)" : "{ schedule, at }"],
    ["next tick", nextCell(s, now)],
    ["last tick", at(s.lastTickAt)],
    ["last fired", at(s.lastFiredAt)],
    ["last error", s.lastError ? paint("red", visible(s.lastError)) : "-"],
    ["created", iso(s.createdAt)],
    ["updated", iso(s.updatedAt)],
  ];
  const width = Math.max(...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${paint("dim", k.padEnd(width))}  ${v}\n`).join("");
}
