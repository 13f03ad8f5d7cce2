/** `engine.inspect` and `engine.listKeys`: read records (and one record's history) for operators. */
import { InputValidationError } from "../../errors.js";
import { assertValidKey, assertValidRunKey } from "../../keys/key-validation.js";
import { LIST_KEYS_OPTIONS } from "../../options/known-options.js";
import { checkOptions } from "../../options/option-shape.js";
import { childLinks } from "../../store/children.js";
import { selectHistory, selectRecord, selectRecords } from "../../store/operations.js";
import type { Executor, Tables } from "../../store/run-store.js";
import { selectTombstone } from "../../store/tombstones.js";
import type { KeyPage, ListKeysOptions, RunRecord, TombstoneRecord } from "./records.js";
import { decodeCursor, encodeCursor, toRecord, toTombstoneRecord } from "./records.js";

/** The record of one key with its history, its tombstone, or `null` when absent; see `Engine.inspect`. */
export async function inspect(
  db: Executor,
  tables: Tables,
  tenantId: string,
  key: string,
): Promise<RunRecord | TombstoneRecord | null> {
  assertValidRunKey(tenantId, key);
  const row = await selectRecord(db, tables, { tenantId, key });
  if (!row) {
    const tombstone = await selectTombstone(db, tables, { tenantId, key });
    return tombstone ? toTombstoneRecord(tenantId, key, tombstone) : null;
  }
  const parent = { tenantId, key, runId: row.run_id };
  const [history, children] = await Promise.all([
    selectHistory(db, tables, { tenantId, key }, row.run_id),
    childLinks(db, tables, parent),
  ]);
  return toRecord(row, history, children);
}

/** One page of records, newest first; see `Engine.listKeys`. */
export async function listKeys(db: Executor, tables: Tables, opts: ListKeysOptions = {}): Promise<KeyPage> {
  checkOptions("listKeys", LIST_KEYS_OPTIONS, opts);
  if (opts.tenantId !== undefined) assertValidKey(opts.tenantId, "tenant id");
  if (opts.workflow !== undefined) assertValidKey(opts.workflow, "workflow name");
  if (opts.status !== undefined && !["in_flight", "completed", "parked", "suspended"].includes(opts.status)) {
    throw new InputValidationError([
      { path: "status", message: "must be 'in_flight', 'completed', 'parked' or 'suspended'" },
    ]);
  }
  const limit = opts.limit ?? 50;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
    throw new InputValidationError([{ path: "limit", message: "must be an integer from 1 to 1000" }]);
  }
  const rows = await selectRecords(db, tables, {
    tenantId: opts.tenantId,
    workflow: opts.workflow,
    status: opts.status,
    stuck: opts.stuck === true,
    limit,
    after: opts.cursor === undefined ? undefined : decodeCursor(opts.cursor),
  });
  const items = rows.map((r) => toRecord(r, undefined));
  const lastRow = rows[limit - 1];
  return { items, nextCursor: rows.length === limit && lastRow ? encodeCursor(lastRow) : null };
}
