import { PGlite } from "@electric-sql/pglite";
import { withPreparedStatements } from "@idempo/core";
import type { Generated } from "kysely";
import { Kysely, PostgresDialect, sql } from "kysely";
import { PGliteDialect } from "kysely-pglite-dialect";
import pg from "pg";

/** The service's business tables. */
export interface Database {
  charges: {
    id: string;
    tenant_id: string;
    amount: number;
    currency: string;
    description: string | null;
    status: string;
    network_ref: string | null;
    created_at: Generated<Date>;
  };
  refunds: { id: string; tenant_id: string; charge_id: string; amount: number; created_at: Generated<Date> };
  customers: { id: string; tenant_id: string; email: string; created_at: Generated<Date> };
}

/**
 * A pool that outlives a lost server: `withPreparedStatements` listens for
 * the errors node-postgres emits on idle connections (without a listener,
 * a server restart or failover crashes the process), connects time out
 * fast (a caller retries instead of hanging), and TCP keepalive notices a
 * server that vanished without a reset.
 */
function serverPool(url: string): pg.Pool {
  return withPreparedStatements(
    new pg.Pool({ connectionString: url, max: 8, connectionTimeoutMillis: 2_000, keepAlive: true }),
  );
}

/**
 * The database: the PostgreSQL server at `url` when one is given, else an
 * in-memory PGlite (PostgreSQL compiled to WebAssembly) that needs no set-up
 * and is gone when the process exits.
 *
 * PGlite has a single connection: inside a workflow phase, use its `tx`
 * only. The wrapped handler (`POST /v1/customers`) may use `db`, because
 * @idempo/http runs it outside any transaction.
 */
export async function openDatabase(url: string | undefined): Promise<{ db: Kysely<Database>; label: string }> {
  const db = url
    ? new Kysely<Database>({ dialect: new PostgresDialect({ pool: serverPool(url) }) })
    : new Kysely<Database>({ dialect: new PGliteDialect(await PGlite.create()) });
  await sql`
    CREATE TABLE IF NOT EXISTS charges (
      id text PRIMARY KEY, tenant_id text NOT NULL, amount integer NOT NULL, currency text NOT NULL,
      description text, status text NOT NULL, network_ref text, created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS refunds (
      id text PRIMARY KEY, tenant_id text NOT NULL, charge_id text NOT NULL REFERENCES charges (id),
      amount integer NOT NULL, created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    CREATE TABLE IF NOT EXISTS customers (
      id text PRIMARY KEY, tenant_id text NOT NULL, email text NOT NULL, created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  return { db, label: url ? "PostgreSQL (DATABASE_URL)" : "embedded PGlite, in memory" };
}
