/**
 * Opening a PGlite data directory (`--pglite DIR`): the embedded PostgreSQL
 * an application or the checkout demo keeps on disk. PGlite and its Kysely
 * dialect are optional peer dependencies of the CLI, loaded only here.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { Kysely } from "kysely";
import { OperationalError } from "./errors.js";

/**
 * Open the PGlite database in `dir` behind a Kysely instance; destroying it
 * closes PGlite. PGlite allows one process per data directory: stop the
 * application that uses it before pointing the CLI at it.
 *
 * @param create make a new, empty database when `dir` does not exist (`migrate` only).
 * @throws OperationalError when `dir` does not exist (and `create` is false) or PGlite is not installed.
 */
// biome-ignore lint/suspicious/noExplicitAny: the CLI reads idempo's tables with plain SQL only
export async function openPglite(dir: string, create: boolean): Promise<Kysely<any>> {
  const path = resolve(dir);
  if (!create && !existsSync(path)) {
    throw new OperationalError(`no PGlite data directory at ${path}: check --pglite (\`idempo migrate\` creates one)`);
  }
  let modules: [typeof import("@electric-sql/pglite"), typeof import("kysely-pglite-dialect"), typeof import("kysely")];
  try {
    modules = await Promise.all([import("@electric-sql/pglite"), import("kysely-pglite-dialect"), import("kysely")]);
  } catch (error) {
    throw new OperationalError(
      "--pglite needs @electric-sql/pglite and kysely-pglite-dialect (npm install @electric-sql/pglite kysely-pglite-dialect)",
      { cause: error },
    );
  }
  const [{ PGlite }, { PGliteDialect }, { Kysely }] = modules;
  const pglite = await PGlite.create(path);
  return new Kysely<unknown>({ dialect: new PGliteDialect(pglite) });
}
