/**
 * Opening the database for one command: a small pg pool with a short
 * connect timeout (an operator waiting on a dead host wants the answer in
 * seconds) or a PGlite data directory, a probe that turns driver errors
 * into one readable line, and the database clock that every age and lease
 * in the output is measured on.
 */
import type { Engine } from "@idempo/core";
import { createEngine } from "@idempo/core";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { describeDatabaseError } from "./database-error.js";
import { OperationalError } from "./errors.js";
import { openPglite } from "./pglite.js";

/** How long to wait for a connection before giving up, in ms. */
const CONNECT_TIMEOUT_MS = 5_000;

/** An open database with an engine on it. */
export interface Session {
  readonly engine: Engine;
  // biome-ignore lint/suspicious/noExplicitAny: the CLI reads idempo's tables with plain SQL only
  readonly db: Kysely<any>;
  /** The database clock when the session opened: ages and lease deadlines are computed from it. */
  readonly now: Date;
  /** `host:port` of the server, or `PGlite DIR`, for messages. */
  readonly where: string;
  readonly schema: string;
}

/** `host:port` of a connection string, without credentials. */
function serverAddress(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || "localhost"}:${u.port || "5432"}`;
  } catch {
    return "the configured server";
  }
}

/** Where the records are: a PostgreSQL server, or a PGlite data directory. */
export type DatabaseTarget = { readonly url: string } | { readonly pglite: string };

/** A small pg pool on `url`, with a short connect timeout. */
function openPool(url: string): Kysely<unknown> {
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: "idempo-cli",
  });
  // An idle client dropped by the server must not crash the command with an unhandled 'error'.
  pool.on("error", () => undefined);
  return new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
}

/**
 * Connect, probe and run `fn` with a {@link Session}; the connection is
 * closed afterwards whatever happens. With `requireSchema`, a database
 * without idempo's tables is reported with the command that creates them
 * (and a PGlite directory that does not exist is not created).
 *
 * @throws OperationalError with a one-line cause when the database cannot be reached.
 */
export async function withSession<T>(
  options: { target: DatabaseTarget; schema: string; requireSchema: boolean },
  fn: (session: Session) => Promise<T>,
): Promise<T> {
  const { target } = options;
  const where = "url" in target ? serverAddress(target.url) : `PGlite ${target.pglite}`;
  const db = "url" in target ? openPool(target.url) : await openPglite(target.pglite, !options.requireSchema);
  try {
    let now: Date;
    let present: boolean;
    try {
      const { rows } = await sql<{ now: Date; present: boolean }>`
        SELECT clock_timestamp() AS now,
               to_regclass(format('%I.runs', ${options.schema}::text)) IS NOT NULL AS present
      `.execute(db);
      now = rows[0]?.now ?? new Date();
      present = rows[0]?.present === true;
    } catch (error) {
      throw new OperationalError(describeDatabaseError(error, where, "connect"), { cause: error });
    }
    if (options.requireSchema && !present) {
      throw new OperationalError(
        `no idempo tables in schema '${options.schema}' at ${where}: run \`idempo migrate\` (or pass the right --schema)`,
      );
    }
    const engine = createEngine({ db, schema: options.schema });
    try {
      return await fn({ engine, db, now, where, schema: options.schema });
    } catch (error) {
      if (error instanceof OperationalError || !isDriverError(error)) throw error;
      throw new OperationalError(describeDatabaseError(error, where), { cause: error });
    }
  } finally {
    await db.destroy().catch(() => undefined);
  }
}

/** A failure of the connection or the server (not of the CLI's own logic, nor a usage error). */
function isDriverError(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (typeof code === "string" && /^E[A-Z]+$/.test(code)) || /Connection terminated/.test(error.message);
}
