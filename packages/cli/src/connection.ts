/** The options every command shares (`--database-url`, `--schema`) and opening a session with them. */
import { IdempoError } from "@idempo/core";
import type { Command } from "commander";
import type { Session } from "./session.js";
import { withSession } from "./session.js";
import { usageError } from "./usage.js";

interface GlobalOptions {
  databaseUrl?: string;
  schema: string;
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
  const { databaseUrl, schema } = command.optsWithGlobals<GlobalOptions>();
  if (!databaseUrl) usageError(command, "no database: pass --database-url or set DATABASE_URL");
  let protocol = "";
  try {
    protocol = new URL(databaseUrl).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "postgres:" && protocol !== "postgresql:") {
    usageError(command, "--database-url must be a postgres:// URL, e.g. postgres://user:password@host:5432/db");
  }
  try {
    return await withSession({ databaseUrl, schema, requireSchema }, fn);
  } catch (error) {
    if (error instanceof IdempoError && error.httpStatus === 400) usageError(command, error.message);
    throw error;
  }
}
