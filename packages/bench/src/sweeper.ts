/**
 * The sweeper's effect on the hot path: with 100 000 completed records past
 * retention (each with its history entry) in the table, measure new-key
 * runOnce at full concurrency first without the sweeper, then while a
 * sweeper deletes all of them, and compare the p99s.
 */
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect } from "kysely";
import type { Operation, RoundResult } from "./measure.js";
import { runLoad } from "./measure.js";
import type { PgBench } from "./setup.js";
import { openPool } from "./setup.js";
import { seedCopies, TENANT } from "./workload.js";

export const EXPIRED_ROWS = 100_000;

export interface SweepRound {
  readonly without: RoundResult;
  readonly during: RoundResult;
  readonly deleted: number;
  readonly sweepMs: number;
}

/**
 * One round. The sweeper runs as a background worker would: its own engine
 * on its own single connection, calling `sweep()` with the defaults
 * (batches of 500, each its own short transaction) until nothing is left.
 */
export async function sweeperRound(
  bench: PgBench,
  round: number,
  hotPath: Operation,
  concurrency: number,
  baselineMs: number,
): Promise<SweepRound> {
  await seedCopies(bench.admin, {
    fromTenant: TENANT,
    fromKey: "seed-order",
    toTenant: "expired",
    prefix: `ex${round}-`,
    count: EXPIRED_ROWS,
    set: { expires_at: "clock_timestamp() - interval '1 day'" },
    withHistory: true,
  });
  await bench.admin.query("VACUUM ANALYZE idempo.runs, idempo.run_history");

  const without = await runLoad(hotPath, { concurrency, durationMs: baselineMs, warmupMs: 300 });

  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: openPool(bench.url, 1) }) });
  const sweeper = createEngine({ db });
  const sweeping = (async () => {
    const started = performance.now();
    let deleted = 0;
    for (;;) {
      const n = await sweeper.sweep();
      deleted += n;
      if (n === 0 || deleted >= EXPIRED_ROWS) return { deleted, sweepMs: performance.now() - started };
    }
  })();
  try {
    const during = await runLoad(hotPath, { concurrency, durationMs: 0, warmupMs: 0, until: sweeping });
    return { without, during, ...(await sweeping) };
  } finally {
    await sweeping.catch(() => undefined);
    await db.destroy();
  }
}
