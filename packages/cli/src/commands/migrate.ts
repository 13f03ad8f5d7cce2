/** `idempo migrate [--print]`: apply idempo's SQL migrations, or print them for a DBA. */
import type { Command } from "commander";
import { withDatabase } from "../connection.js";
import type { Io } from "../io.js";
import { plural, printJson } from "../output.js";
import { usageError } from "../usage.js";

/**
 * The pending migrations as one script a DBA can review and apply with
 * psql: the same advisory lock, schema, bookkeeping rows and search_path the
 * engine's runner uses, so `idempo migrate` afterwards finds nothing to do.
 * Without `transaction`, the script leaves out BEGIN and COMMIT, for a
 * migration tool that runs each file in its own transaction (the lock and
 * `SET LOCAL` then last until that transaction ends).
 */
function migrationScript(
  schema: string,
  pending: readonly { name: string; sql: string }[],
  transaction: boolean,
): string {
  const id = `"${schema}"`;
  const lines = [
    `-- idempo: ${plural(pending.length, "pending migration")} for schema ${schema}`,
    ...(transaction
      ? ["BEGIN;"]
      : ["-- Run it inside one transaction: the lock and SET LOCAL below last until that transaction ends."]),
    `SELECT pg_advisory_xact_lock(hashtextextended('idempo.migrate:${schema}', 0));`,
    `CREATE SCHEMA IF NOT EXISTS ${id};`,
    `CREATE TABLE IF NOT EXISTS ${id}.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());`,
    `SET LOCAL search_path TO ${id}, public;`,
  ];
  for (const m of pending) {
    const version = Number.parseInt(m.name, 10);
    const name = m.name.replace(/'/g, "''");
    lines.push(
      "",
      `-- ${m.name}`,
      `INSERT INTO ${id}.schema_migrations (version, name) VALUES (${version}, '${name}');`,
    );
    lines.push(m.sql.trimEnd());
  }
  if (transaction) lines.push("", "COMMIT;");
  return `${lines.join("\n")}\n`;
}

/** Register `migrate` on the program. */
export function registerMigrate(program: Command, io: Io): void {
  program
    .command("migrate")
    .description("apply pending SQL migrations under an advisory lock (safe to run concurrently)")
    .option("--print", "print the pending SQL as one script instead of applying it (for DBAs who apply it by hand)")
    .option(
      "--no-transaction",
      "with --print: leave out BEGIN/COMMIT, for a migration tool that runs each file in its own transaction (graphile-migrate, dbmate, Flyway)",
    )
    .option("--json", "print the migration names as JSON: {applied: [...]} or {pending: [...]}")
    .addHelpText(
      "after",
      `
Examples:
  $ idempo migrate
  $ idempo migrate --print > idempo.sql && psql "$DATABASE_URL" -f idempo.sql
  $ idempo migrate --print --no-transaction > db/migrations/20260101000000_idempo.sql`,
    )
    .action(async (opts: { print?: boolean; transaction: boolean; json?: boolean }, command: Command) => {
      if (!opts.transaction && !opts.print) usageError(command, "--no-transaction only goes with --print");
      await withDatabase(
        command,
        async ({ engine, schema }) => {
          if (opts.print) {
            const pending = await engine.pendingMigrations();
            if (opts.json) return printJson(io, { pending: pending.map((m) => m.name) });
            if (pending.length === 0) return io.out(`-- schema ${schema} is up to date: nothing to apply\n`);
            return io.out(migrationScript(schema, pending, opts.transaction));
          }
          const applied = await engine.migrate();
          if (opts.json) return printJson(io, { applied });
          if (applied.length === 0) return io.out(`schema ${schema} is up to date\n`);
          io.out(`applied ${plural(applied.length, "migration")} to schema ${schema}:\n`);
          for (const name of applied) io.out(`  ${name}\n`);
        },
        false,
      );
    });
}
