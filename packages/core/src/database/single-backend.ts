/**
 * Is the database PGlite? PGlite names itself in `version()` ("PostgreSQL
 * 18.6 (PGlite 0.5.14) on wasm32 ..."): PostgreSQL in single-user mode, one
 * backend in this process. So a lock is only ever held by the session that
 * asks for it, and no autovacuum runs: nothing keeps the tables' statistics
 * (and so the plans made from them) up to date but the engine itself.
 */

/** The one query it takes. */
const SINGLE_BACKEND_QUERY = "SELECT strpos(version(), '(PGlite ') > 0 AS pglite";

/** Ask once, with `query` running {@link SINGLE_BACKEND_QUERY} on a connection, whether it is PGlite. */
export async function isSingleBackend(query: (text: string) => Promise<readonly unknown[]>): Promise<boolean> {
  const rows = (await query(SINGLE_BACKEND_QUERY)) as readonly { pglite?: unknown }[];
  return rows[0]?.pglite === true;
}
