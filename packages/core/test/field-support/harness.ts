/**
 * Small helpers shared by the field-fault suites (test/field-*.test.ts):
 * deferred promises and barriers for races and pauses, a query-logging
 * Kysely for "no SQL was sent" assertions, and row counters.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import type { RunRecord, TombstoneRecord } from "../../src/index.ts";
import type { TestDatabase, TestDb } from "../support/db.ts";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * Start `n` calls that all wait on one gate, then open it, so they hit the
 * database together. Each settlement is timed from the moment the gate opens.
 */
export async function raceThroughBarrier<T>(
  n: number,
  call: (i: number) => Promise<T>,
): Promise<Array<{ ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number }>> {
  const gate = deferred();
  let opened = 0;
  const runs = Array.from({ length: n }, async (_, i) => {
    await gate.promise;
    try {
      const value = await call(i);
      return { ok: true as const, value, ms: performance.now() - opened };
    } catch (error) {
      return { ok: false as const, error, ms: performance.now() - opened };
    }
  });
  opened = performance.now();
  gate.resolve();
  return Promise.all(runs);
}

/** The rejection of `promise`; fails the test when it resolves instead. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    const value = await promise;
    throw new Error(`expected a rejection, got ${JSON.stringify(value)?.slice(0, 300)}`);
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("expected a rejection")) throw error;
    return error as Error;
  }
}

/**
 * A second Kysely on the file's database whose `log` callback records every
 * statement, for engines that must prove they sent no SQL.
 */
export function useLoggedDb(t: TestDatabase): { readonly db: TestDb; readonly queries: string[] } {
  const queries: string[] = [];
  const holder = { db: undefined as unknown as TestDb, queries };
  beforeAll(() => {
    const pool = new pg.Pool({ connectionString: t.url, max: 4 });
    // The file's database is dropped WITH (FORCE) after the tests; a client
    // still closing then must not surface as an uncaught pool error.
    pool.on("error", () => undefined);
    holder.db = new Kysely({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        queries.push(event.query.sql);
      },
    });
  });
  afterAll(async () => {
    await holder.db?.destroy();
  });
  return holder;
}

/** Rows in idempo.runs, optionally for one tenant or one key. */
export async function countRuns(db: TestDb, where: { tenantId?: string; key?: string } = {}): Promise<number> {
  const conds = [sql`true`];
  if (where.tenantId !== undefined) conds.push(sql`tenant_id = ${where.tenantId}`);
  if (where.key !== undefined) conds.push(sql`key = ${where.key}`);
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE ${sql.join(conds, sql` AND `)}`.execute(db);
  return rows[0]?.n ?? 0;
}

/** Rows in idempo.runs and idempo.run_history together. */
export async function countIdempoRows(db: TestDb): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT ((SELECT count(*) FROM idempo.runs) + (SELECT count(*) FROM idempo.run_history))::int AS n`.execute(db);
  return rows[0]?.n ?? 0;
}

export async function countOrders(db: TestDb, tenantId?: string): Promise<number> {
  const { rows } = await (tenantId === undefined
    ? sql<{ n: number }>`SELECT count(*)::int AS n FROM orders`
    : sql<{ n: number }>`SELECT count(*)::int AS n FROM orders WHERE tenant_id = ${tenantId}`
  ).execute(db);
  return rows[0]?.n ?? 0;
}

/**
 * The parts of a record a refused call must never change. The lease's
 * remaining time moves with the clock and the owner's heartbeat, so it is
 * compared separately (it must stay positive while the owner works).
 */
export function frozenView(rec: RunRecord | TombstoneRecord | null): object | null {
  if (rec === null || rec.status === "expired") return rec;
  const { leaseRemainingMs: _lease, ...rest } = rec;
  return rest;
}
