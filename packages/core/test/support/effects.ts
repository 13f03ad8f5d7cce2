/**
 * Counting effects, not return values: rows in the business tables and in
 * idempo's own tables, and the parts of a record a refused call must leave
 * alone.
 */
import { sql } from "kysely";
import type { Engine } from "../../src/index.ts";
import type { TestDb } from "./db.ts";

/** Orders rows, optionally for one tenant and cart. */
export async function countOrders(db: TestDb, where: { tenantId?: string; cartId?: string } = {}): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM orders
    WHERE (${where.tenantId ?? null}::text IS NULL OR tenant_id = ${where.tenantId ?? null})
      AND (${where.cartId ?? null}::text IS NULL OR cart_id = ${where.cartId ?? null})
  `.execute(db);
  return rows[0]?.n ?? -1;
}

/** Rows in `<schema>.runs` (all keys, or one tenant/key). */
export async function countRuns(
  db: TestDb,
  where: { tenantId?: string; key?: string } = {},
  schema = "idempo",
): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.id(schema, "runs")}
    WHERE (${where.tenantId ?? null}::text IS NULL OR tenant_id = ${where.tenantId ?? null})
      AND (${where.key ?? null}::text IS NULL OR key = ${where.key ?? null})
  `.execute(db);
  return rows[0]?.n ?? -1;
}

/** Rows in `<schema>.run_history` for one key (every run id). */
export async function countHistory(db: TestDb, tenantId: string, key: string, schema = "idempo"): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.id(schema, "run_history")} WHERE tenant_id = ${tenantId} AND key = ${key}
  `.execute(db);
  return rows[0]?.n ?? -1;
}

/**
 * The parts of a record that a refused call (409, 422, 400) must not change.
 * `null` when there is no record.
 */
export async function recordSnapshot(engine: Engine, tenantId: string, key: string) {
  const r = await engine.inspect(tenantId, key);
  if (!r || r.status === "expired") return r && { status: r.status };
  return {
    runId: r.runId,
    workflow: r.workflow,
    ownerToken: r.ownerToken,
    status: r.status,
    attempt: r.attempt,
    recoveryPoint: r.recoveryPoint,
    state: r.state,
    input: r.input,
    response: r.response,
    updatedAt: r.updatedAt.toISOString(),
    expiresAt: r.expiresAt?.toISOString() ?? null,
    history: r.history?.map((h) => `${h.kind}:${h.name}:${h.attempt}:${h.outcome}`),
  };
}

/** A run's history as `name:attempt:outcome`, oldest first. */
export async function historyOf(engine: Engine, tenantId: string, key: string): Promise<string[]> {
  const r = await engine.inspect(tenantId, key);
  return r?.history?.map((h) => `${h.name}:${h.attempt}:${h.outcome}`) ?? [];
}
