/**
 * `engine.sweep`: delete completed records past retention (leaving their
 * tombstones; never a child whose parent has not completed), cancel child
 * runs whose parent ended before them, delete tombstones past their time
 * and outbox messages delivered long ago, in bounded batches (never
 * in-flight records).
 */
import { SWEEP_OPTIONS } from "../../options/known-options.js";
import { MAX_STORED_MS } from "../../options/limits.js";
import { intOption } from "../../options/option-checks.js";
import { checkOptions } from "../../options/option-shape.js";
import { cancelOrphanedChildren, PARENT_ENDED } from "../../store/child-cancel.js";
import { sweepBatch, sweepOutboxBatch } from "../../store/maintenance.js";
import { sweepTombstoneBatch } from "../../store/tombstones.js";
import type { EngineContext } from "../engine-context.js";

/** Options of `sweep`. */
export interface SweepOptions {
  /** Records per batch, i.e. per short transaction (Default: 500). */
  batchSize?: number;
  /** Most batches in one call, per table (Default: 100). */
  maxBatches?: number;
  /** Keep delivered outbox messages this long in ms before deleting them (Default: 604 800 000, 7 days). */
  outboxRetentionMs?: number;
}

/** Sweep in batches; returns how many key records were deleted (tombstones not counted). See `Engine.sweep`. */
export async function sweep(ctx: EngineContext, opts: SweepOptions = {}): Promise<number> {
  checkOptions("sweep", SWEEP_OPTIONS, opts);
  const batchSize = intOption("sweep", "batchSize", opts.batchSize, 1, 100_000, 500);
  const maxBatches = intOption("sweep", "maxBatches", opts.maxBatches, 1, 1_000_000, 100);
  const keepOutboxMs = intOption(
    "sweep",
    "outboxRetentionMs",
    opts.outboxRetentionMs,
    1,
    MAX_STORED_MS,
    7 * 24 * 60 * 60 * 1000,
  );
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await sweepBatch(ctx.db, ctx.tables, batchSize);
    total += n;
    ctx.telemetry.count("sweepDeleted", { "idempo.table": "runs" }, n);
    if (n < batchSize) break;
  }
  for (let i = 0; i < maxBatches; i++) {
    // Children left running by a parent that ended (a crash between its end and the cancel of its children).
    if ((await cancelOrphanedChildren(ctx.db, ctx.tables, batchSize, PARENT_ENDED)) < batchSize) break;
  }
  for (let i = 0; i < maxBatches; i++) {
    const n = await sweepTombstoneBatch(ctx.db, ctx.tables, batchSize);
    ctx.telemetry.count("sweepDeleted", { "idempo.table": "tombstones" }, n);
    if (n < batchSize) break;
  }
  for (let i = 0; i < maxBatches; i++) {
    if ((await sweepOutboxBatch(ctx.db, ctx.tables, batchSize, keepOutboxMs)) < batchSize) break;
  }
  return total;
}
