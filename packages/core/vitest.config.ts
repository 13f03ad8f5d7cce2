import { availableParallelism } from "node:os";
import { mergeConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

/**
 * The shared settings, with the core suite's files three at a time at least.
 * The suite waits far more than it computes (on the database, on leases that
 * must run out, on worker processes firing schedules by the real clock): one
 * file at a time, vitest's default on two cores, it keeps about a third of one
 * core busy and is the longest suite of CI. Each file clones its own database,
 * so files running side by side share nothing but the server.
 */
export default mergeConfig(shared, { test: { maxWorkers: Math.max(3, availableParallelism() - 1) } });
