import { sql } from "kysely";
import type { AnyDb, ClonedDatabase } from "../../../testkit/src/index.ts";
import { useClonedDatabase } from "../../../testkit/src/index.ts";

/**
 * This file's own database, with the consumers' effect table: one row per
 * delivery key (`PRIMARY KEY`), so a consumer that inserts with
 * `ON CONFLICT DO NOTHING` applies each message exactly once however often
 * the broker hands it over.
 */
export function useRelayDatabase(): ClonedDatabase {
  return useClonedDatabase("idempo_relays_t", {
    pool: 12,
    prepare: async (db) => {
      await sql`CREATE TABLE received (delivery_key text PRIMARY KEY, consumer text NOT NULL)`.execute(db);
    },
  });
}

/**
 * What a deduplicating consumer does with one arrival: insert its delivery
 * key; returns true when it was new (the effect happened), false for a copy.
 */
export async function applyOnce(db: AnyDb, deliveryKey: string, consumer: string): Promise<boolean> {
  const { rows } = await sql`
    INSERT INTO received (delivery_key, consumer) VALUES (${deliveryKey}, ${consumer})
    ON CONFLICT (delivery_key) DO NOTHING RETURNING delivery_key`.execute(db);
  return rows.length === 1;
}

export async function receivedCount(db: AnyDb, consumer: string): Promise<number> {
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM received WHERE consumer = ${consumer}`.execute(db);
  return rows[0]?.n ?? 0;
}

/** One outbox row as the tests look at it. */
export interface OutboxRow {
  deliveryKey: string;
  status: "pending" | "delivered" | "dead";
  attempts: number;
  lastError: string | null;
}

export async function outboxRows(db: AnyDb, tenantId: string): Promise<OutboxRow[]> {
  const { rows } = await sql<OutboxRow>`
    SELECT delivery_key AS "deliveryKey", status, attempts, last_error AS "lastError"
    FROM idempo.outbox WHERE tenant_id = ${tenantId} ORDER BY message_id`.execute(db);
  return rows;
}
