import { availableParallelism } from "node:os";
import { mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

/**
 * The shared settings, with the core suite's files two at a time at least.
 * The suite waits far more than it computes (on the database, on leases that
 * must run out, on worker processes): one file at a time, vitest's default on
 * two cores, it is the longest suite of CI by minutes. Each file clones its
 * own database, so files side by side share nothing but the server. Three at
 * a time once made two tests time out; both were races that load widened (a
 * polling worker's next wake-up read after its due scan, a stop test counting
 * only the queries held in a black hole), and both are fixed.
 */
export default mergeConfig(shared, { test: { maxWorkers: Math.max(2, availableParallelism() - 1) } });
