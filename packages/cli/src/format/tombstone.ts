/**
 * A key whose completed record expired and was swept: only its tombstone is
 * left (no input, state, response or history), and a request for the key
 * gets 410 `key_expired` until the tombstone's time ends. How `keys show`
 * prints one, for people and as `--json`, and how the verbs that need a
 * run refuse one.
 */
import type { RunRecord, TombstoneRecord } from "@idempo/core";
import { OperationalError } from "../errors.js";
import type { Paint } from "./colour.js";
import { formatDuration } from "./duration.js";
import { iso } from "./times.js";
import { visible } from "./visible.js";

/** The sentence for a key in its tombstone's time, swept (a tombstone) or not (an expired record). */
export function refuseExpired(since: Date | null, until: Date): string {
  return (
    `410 key_expired: the record is past retention${since ? ` (since ${iso(since)})` : ""} and its tombstone ` +
    `refuses the key until ${iso(until)}; after that a retry runs the workflow again as new`
  );
}

/**
 * What a retry of a completed record past retention gets: 410 `key_expired`
 * while its tombstone lasts (`until`), then a run from the start.
 */
export type ExpiredRetry =
  | { readonly action: "run_again"; readonly since: Date | null }
  | { readonly action: "refuse_expired"; readonly since: Date | null; readonly until: Date };

/** The retry of a completed record that expired at `since`; `now` is the database clock. */
export function expiredRetry(since: Date | null, tombstoneUntil: Date | null, now: Date): ExpiredRetry {
  return tombstoneUntil !== null && tombstoneUntil > now
    ? { action: "refuse_expired", since, until: tombstoneUntil }
    : { action: "run_again", since };
}

/** {@link ExpiredRetry} as a sentence for people. */
export function describeExpired(r: ExpiredRetry): string {
  if (r.action === "refuse_expired") return refuseExpired(r.since, r.until);
  const since = r.since ? ` (since ${iso(r.since)})` : "";
  return `run the workflow again from the start: the record is past retention${since} and counts as absent`;
}

/** `keys show --json` of a tombstone (see docs/cli.md). */
export interface TombstoneJson {
  tenantId: string;
  key: string;
  workflow: string;
  status: "expired";
  /** Always true: only the tombstone is left, the record was swept. */
  tombstone: true;
  outcome: string;
  completedAt: string;
  expiresAt: string;
  expired: true;
  tombstoneUntil: string;
  retry: { action: "refuse_expired"; since: string; until: string };
}

export function tombstoneJson(record: TombstoneRecord): TombstoneJson {
  return {
    tenantId: record.tenantId,
    key: record.key,
    workflow: record.workflow,
    status: "expired",
    tombstone: true,
    outcome: record.outcome,
    completedAt: record.completedAt.toISOString(),
    expiresAt: record.expiresAt.toISOString(),
    expired: true,
    tombstoneUntil: record.tombstoneUntil.toISOString(),
    retry: {
      action: "refuse_expired",
      since: record.expiresAt.toISOString(),
      until: record.tombstoneUntil.toISOString(),
    },
  };
}

/** The human view of a tombstone: `field` formats one labelled line as `keys show` does. */
export function tombstoneView(
  record: TombstoneRecord,
  now: Date,
  paint: Paint,
  field: (name: string, value: string) => string,
): string {
  const left = record.tombstoneUntil.getTime() - now.getTime();
  return [
    `${paint("bold", `${visible(record.tenantId)} / ${visible(record.key)}`)}  ${record.workflow}  ${paint("dim", "expired (tombstone)")}\n\n`,
    field("retry now", paint("bold", refuseExpired(record.expiresAt, record.tombstoneUntil))),
    "\n",
    field("outcome", record.outcome),
    field("completed", iso(record.completedAt)),
    field("expired", `${iso(record.expiresAt)} (end of retention)`),
    field("tombstone", `until ${iso(record.tombstoneUntil)} (${left > 0 ? `in ${formatDuration(left)}` : "now"})`),
    "\n",
    paint(
      "dim",
      "only the tombstone is left: no input, state, response or timeline; `idempo keys delete` removes it\n",
    ),
  ].join("");
}

/** The record a verb acts on: a tombstone has no run to act on, and says so. */
export function runOf(record: RunRecord | TombstoneRecord, verb: string): RunRecord {
  if (record.status !== "expired") return record;
  throw new OperationalError(
    `key '${visible(record.key)}' in tenant '${visible(record.tenantId)}' has only its tombstone left (the run ` +
      `completed ${record.outcome} and its record expired at ${iso(record.expiresAt)}): there is nothing to ${verb}; ` +
      `a request gets 410 key_expired until ${iso(record.tombstoneUntil)} (idempo keys delete removes the tombstone)`,
  );
}
