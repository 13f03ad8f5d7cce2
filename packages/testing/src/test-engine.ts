import type { Engine, EngineOptions } from "@idempo/core";
import { createEngine } from "@idempo/core";

/** Lease of {@link testEngine} when none is given, in ms. */
const TEST_LEASE_MS = 1_000;

/** Options of {@link testEngine}: every engine option except `db`. */
export type TestEngineOptions<DB> = Omit<EngineOptions<DB>, "db">;

/**
 * An engine with a short lease for tests, so a test that lets a lease lapse
 * (instead of calling `engine.release`) waits about a second, not the
 * production default of 30. The heartbeat follows the lease (a third of it)
 * unless `heartbeatMs` is set; a paused or slow attempt keeps its key.
 *
 * @param db the test database's Kysely instance (the same database the workflow's tables live in).
 * @param options any engine option; `leaseMs` in ms (Default: 1 000).
 *
 * @example
 * const engine = testEngine(db, { leaseMs: 500 })
 * await engine.migrate()
 */
export function testEngine<DB>(db: EngineOptions<DB>["db"], options: TestEngineOptions<DB> = {}): Engine {
  return createEngine<DB>({ ...options, db, leaseMs: options.leaseMs ?? TEST_LEASE_MS });
}
