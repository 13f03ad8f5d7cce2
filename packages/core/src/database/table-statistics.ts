/**
 * Statistics for idempo's tables where no autovacuum keeps them: PGlite.
 * PL/pgSQL keeps the plan of each statement of the statement functions, made
 * from the tables' statistics at the time; on PostgreSQL autovacuum's ANALYZE
 * invalidates those plans as the tables grow, and they are made again. On
 * PGlite nothing does, so plans made while `run_history` was nearly empty stay
 * scans, and every step got slower as the history grew (about 1 ms per run
 * for every 1 000 runs before it). The engine runs the ANALYZE itself there,
 * after 100, 1 000, 10 000, ... calls of its statement functions, outside
 * any transaction: a few times over a table's growth, each a small sample.
 */
import type { DataLayer } from "./data-layer.js";

const FIRST_ANALYZE_AT = 100;
const NEXT_ANALYZE_FACTOR = 10;

/** Counts calls and analyzes idempo's tables at growing intervals (on a single-backend database only). */
export class TableStatistics {
  #calls = 0;
  #next = FIRST_ANALYZE_AT;
  #stopped = false;

  constructor(
    private readonly layer: DataLayer<unknown>,
    private readonly schema: string,
  ) {}

  /** Note one call; at the next threshold, analyze, when the call ran outside a transaction. */
  async noteCall(inTransaction: boolean): Promise<void> {
    this.#calls++;
    if (this.#stopped || this.#calls < this.#next || inTransaction) return;
    this.#next = this.#calls * NEXT_ANALYZE_FACTOR;
    const tables = ["runs", "run_history", "outbox", "signals"].map((t) => `"${this.schema}"."${t}"`).join(", ");
    try {
      // A small sample (statistics target 10, not 100): what the plans of key lookups need is the tables' size,
      // and it takes about 7 ms on 66 000 rows instead of 45. SET LOCAL keeps the session's own setting.
      await this.layer.transaction(async (_tx, session) => {
        await session.query("SET LOCAL default_statistics_target = 10", []);
        await session.query(`ANALYZE ${tables}`, []);
      });
    } catch {
      // Statistics only make plans better; a database that refuses (privileges) keeps working without them.
      this.#stopped = true;
    }
  }
}
