/**
 * What an operator verb (release, cancel, retry-from, unpark, delete)
 * prints once it has changed a record: one line saying what changed, and
 * one saying what the next call with the key will now do, worked out from
 * the record the verb returned. `--json` prints the same as one object.
 */
import type { RunRecord } from "@idempo/core";
import { describeRetry, diagnose } from "./format/diagnosis.js";
import { formatLease } from "./format/duration.js";
import type { KeyDetailJson } from "./format/record-json.js";
import { keyDetailJson } from "./format/record-json.js";
import type { Item } from "./format/run-items.js";
import { callInDoubt, definitionItems } from "./format/run-items.js";
import { TABLE_WIDTH } from "./format/table.js";
import { wrap } from "./format/wrap.js";
import type { Io } from "./io.js";
import { printJson } from "./output.js";

/** The `--json` document of a verb. */
interface VerbJson {
  tenantId: string;
  key: string;
  /** `released`, `canceled`, `retried_from`, `unparked` or `deleted`. */
  action: string;
  /** What changed, in words (the same sentence the text output starts with). */
  changed: string;
  before: { status: string; recoveryPoint: string | null; attempts: number; ownerToken: string | null };
  /** The record as the verb left it (no state, no response body); `null` once deleted. */
  after: KeyDetailJson | null;
  /** What the next call with the key does now, in words. */
  nextRetry: string;
}

/** True while an attempt holds a live lease on the run. */
export function hasLiveOwner(record: RunRecord): boolean {
  return record.status === "in_flight" && record.ownerToken !== null && (record.leaseRemainingMs ?? 0) > 0;
}

/** "owner 01J… (lease 4m 10s left)", for prompts and messages about a live owner. */
export function liveOwner(record: RunRecord): string {
  return `owner ${record.ownerToken ?? "-"} (lease ${formatLease(record.leaseRemainingMs ?? 0)})`;
}

/**
 * The items a run has committed (up to its recovery point), plus a step
 * (or a parallel item whose branch) started without a recorded result:
 * what starting over would do again.
 */
export function committedItems(record: RunRecord): Item[] {
  const items = definitionItems(record);
  const at = record.recoveryPoint === null ? -1 : items.findIndex((i) => i.name === record.recoveryPoint);
  const done = items.slice(0, at + 1);
  const open = callInDoubt(record.history ?? []);
  if (open && !done.some((i) => i.name === open.name)) {
    done.push({ kind: open.kind === "branch" ? "parallel" : "step", name: open.name });
  }
  return done;
}

/** "phase create_order, step charge" or "nothing (no phase has committed)". */
export function itemList(items: readonly Item[]): string {
  return items.length === 0
    ? "nothing (no phase or step has committed)"
    : items.map((i) => `${i.kind} ${i.name}`).join(", ");
}

/** Print what a verb changed and what the next retry does; `after` is `null` once deleted. */
export function reportVerb(
  io: Io,
  json: boolean,
  v: { action: string; before: RunRecord; after: RunRecord | null; changed: string; now: Date },
): void {
  const nextRetry = v.after
    ? describeRetry(v.after, diagnose(v.after, v.now))
    : "run the workflow from the start: the key is forgotten";
  if (json) {
    const doc: VerbJson = {
      tenantId: v.before.tenantId,
      key: v.before.key,
      action: v.action,
      changed: v.changed,
      before: {
        status: v.before.status,
        recoveryPoint: v.before.recoveryPoint,
        attempts: v.before.attempt,
        ownerToken: v.before.ownerToken,
      },
      after: v.after
        ? keyDetailJson(v.after, diagnose(v.after, v.now), v.now, { state: false, response: false })
        : null,
      nextRetry,
    };
    printJson(io, doc);
    return;
  }
  io.out(`${wrap(v.changed, TABLE_WIDTH, "", "  ").join("\n")}\n`);
  io.out(`${wrap(`a retry now will ${nextRetry}`, TABLE_WIDTH, "", "  ").join("\n")}\n`);
}
