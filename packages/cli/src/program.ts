/** The `idempo` command tree (commander): global options, error handling settings, every subcommand. */
import { createRequire } from "node:module";
import { Command, Option } from "commander";
import { registerConsole } from "./commands/console.js";
import { registerKeysCancel } from "./commands/keys-cancel.js";
import { registerKeysDelete } from "./commands/keys-delete.js";
import { registerKeysList } from "./commands/keys-list.js";
import { registerKeysParked } from "./commands/keys-parked.js";
import { registerKeysRelease } from "./commands/keys-release.js";
import { registerKeysRetryFrom } from "./commands/keys-retry-from.js";
import { registerKeysShow } from "./commands/keys-show.js";
import { registerKeysStuck } from "./commands/keys-stuck.js";
import { registerKeysUnpark } from "./commands/keys-unpark.js";
import { registerMigrate } from "./commands/migrate.js";
import { registerOutboxDead } from "./commands/outbox-dead.js";
import { registerOutboxList } from "./commands/outbox-list.js";
import { registerOutboxRetry } from "./commands/outbox-retry.js";
import { registerResume } from "./commands/resume.js";
import { registerSchedulesList } from "./commands/schedules-list.js";
import { registerSchedulesPause, registerSchedulesResume } from "./commands/schedules-pause.js";
import { registerSchedulesShow } from "./commands/schedules-show.js";
import { registerStats } from "./commands/stats.js";
import { registerSweep } from "./commands/sweep.js";
import { TABLE_WIDTH } from "./format/table.js";
import type { Io } from "./io.js";
import { parseSchema } from "./usage.js";

const { version } = createRequire(import.meta.url)("../package.json") as { version: string };

/**
 * Build the program. Settings made here (exit override, output, help after
 * errors) are inherited by every subcommand created with `.command()`.
 */
export function createProgram(io: Io): Command {
  const program = new Command("idempo")
    .description("Inspect and repair idempo's idempotency keys: stuck runs, timelines, leases, outbox, retention.")
    .version(version, "-V, --version")
    .addOption(
      new Option("--database-url <url>", "PostgreSQL connection string (postgres://user:password@host:5432/db)").env(
        "DATABASE_URL",
      ),
    )
    .addOption(
      new Option("--pglite <dir>", "a PGlite data directory instead of a server (one process at a time)").env(
        "IDEMPO_PGLITE",
      ),
    )
    .addOption(new Option("--schema <name>", "schema of idempo's tables").default("idempo").argParser(parseSchema))
    .exitOverride()
    .showHelpAfterError()
    .showSuggestionAfterError()
    // Every help text within the 100 columns the tables keep to, whatever the terminal says.
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false, helpWidth: TABLE_WIDTH })
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .addHelpText(
      "after",
      `
Exit status: 0 success, 1 operational error (one-line cause on stderr), 2 usage error.

Examples:
  $ export DATABASE_URL=postgres://app@db.internal:5432/shop
  $ idempo keys stuck
  $ idempo keys stuck --pglite ./.pglite/demo
  $ idempo keys show acme order-1002
  $ idempo keys list --tenant acme --status in_flight --older-than 10m --json`,
    );

  registerMigrate(program, io);
  const keys = program
    .command("keys")
    .description("list, inspect, release, cancel, retry, unpark and delete idempotency keys")
    .addHelpText("after", "\nExamples:\n  $ idempo keys stuck\n  $ idempo keys show acme order-1002");
  registerKeysList(keys, io);
  registerKeysStuck(keys, io);
  registerKeysParked(keys, io);
  registerKeysShow(keys, io);
  registerKeysRelease(keys, io);
  registerKeysCancel(keys, io);
  registerKeysRetryFrom(keys, io);
  registerKeysUnpark(keys, io);
  registerKeysDelete(keys, io);
  registerResume(program, io);
  registerSweep(program, io);
  const outbox = program
    .command("outbox")
    .description("list, inspect and requeue outbox messages")
    .addHelpText("after", "\nExamples:\n  $ idempo outbox dead\n  $ idempo outbox list --status pending");
  registerOutboxList(outbox, io);
  registerOutboxDead(outbox, io);
  registerOutboxRetry(outbox, io);
  const schedules = program
    .command("schedules")
    .description("list, inspect, pause and resume durable schedules")
    .addHelpText("after", "\nExamples:\n  $ idempo schedules list\n  $ idempo schedules pause nightly-invoices --yes");
  registerSchedulesList(schedules, io);
  registerSchedulesShow(schedules, io);
  registerSchedulesPause(schedules, io);
  registerSchedulesResume(schedules, io);
  registerStats(program, io);
  registerConsole(program, io);
  return program;
}
