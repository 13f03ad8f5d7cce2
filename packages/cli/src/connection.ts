/** The options every command shares (`--database-url`, `--pglite`, `--schema`) and opening a session with them. */
import { IdempoError } from "@idempo/core";
import type { Command } from "commander";
import type { DatabaseTarget, Session } from "./session.js";
import { withSession } from "./session.js";
import { usageError } from "./usage.js";

interface GlobalOptions {
  databaseUrl?: string;
  pglite?: string;
  schema: string;
}

/**
 * The database the command line names. `--database-url` and `--pglite`
 * exclude each other; one given as a flag wins over the other's environment
 * variable (`DATABASE_URL`, `IDEMPO_PGLITE`).
 */
function targetOf(command: Command): DatabaseTarget {
  const { databaseUrl, pglite } = command.optsWithGlobals<GlobalOptions>();
  const fromFlag = (key: string) => command.getOptionValueSourceWithGlobals(key) === "cli";
  if (pglite && databaseUrl) {
    if (fromFlag("pglite") === fromFlag("databaseUrl")) {
      usageError(command, "both a server and a PGlite directory given: pass --database-url or --pglite, not both");
    }
    return fromFlag("pglite") ? { pglite } : { url: databaseUrl };
  }
  if (pglite) return { pglite };
  if (!databaseUrl)
    usageError(
      command,
      "no database: pass --database-url or set DATABASE_URL (or --pglite DIR for a PGlite directory)",
    );
  let protocol = "";
  try {
    protocol = new URL(databaseUrl).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "postgres:" && protocol !== "postgresql:") {
    usageError(command, "--database-url must be a postgres:// URL, e.g. postgres://user:password@host:5432/db");
  }
  return { url: databaseUrl };
}

/**
 * Run `fn` with a database session built from the command's global options.
 * A missing or malformed URL, and a key or tenant the engine refuses as
 * malformed (400), are usage errors; everything else propagates.
 *
 * @param requireSchema report a database without idempo's tables (Default: true; `migrate` passes false).
 */
export async function withDatabase<T>(
  command: Command,
  fn: (session: Session) => Promise<T>,
  requireSchema = true,
): Promise<T> {
  const target = targetOf(command);
  const { schema } = command.optsWithGlobals<GlobalOptions>();
  try {
    return await withSession({ target, schema, requireSchema }, fn);
  } catch (error) {
    if (error instanceof IdempoError && error.httpStatus === 400) usageError(command, error.message);
    throw error;
  }
}
