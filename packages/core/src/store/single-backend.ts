/**
 * Is the database PGlite? PGlite names itself in `version()` ("PostgreSQL
 * 18.6 (PGlite 0.5.14) on wasm32 ..."): PostgreSQL in single-user mode, one
 * backend in this process. So a lock is only ever held by the session that
 * asks for it, and no autovacuum runs: nothing keeps the tables' statistics
 * (and so the plans made from them) up to date but the engine itself.
 */
import type { DatabaseConnection } from "kysely";
import { CompiledQuery } from "kysely";

/** Ask `connection` once whether it is PGlite (one query). */
export async function isSingleBackend(connection: DatabaseConnection): Promise<boolean> {
  const { rows } = await connection.executeQuery<{ pglite: boolean }>(
    CompiledQuery.raw("SELECT strpos(version(), '(PGlite ') > 0 AS pglite"),
  );
  return rows[0]?.pglite === true;
}
