/** `idempo console`: a small web console: an overview, stuck, in-flight and recent runs, one run's timeline, the outbox, the schedules. */

import type { Command } from "commander";
import { Option } from "commander";
import { sql } from "kysely";
import { withDatabase } from "../connection.js";
import { startConsole } from "../console/server.js";
import { deliveredSignals } from "../delivered-signals.js";
import type { Io } from "../io.js";
import { parsePort } from "../usage.js";

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/** Resolves on the first SIGINT or SIGTERM. */
function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}

/** Register `console` on the program. */
export function registerConsole(program: Command, io: Io): void {
  program
    .command("console")
    .description(
      "serve a web console: an overview, stuck, parked, suspended and recent runs, run timelines, the outbox, schedules",
    )
    .addOption(new Option("--host <address>", "address to listen on").default("127.0.0.1"))
    .addOption(new Option("--port <port>", "port to listen on (0 picks a free one)").default(4300).argParser(parsePort))
    .option(
      "--allow-actions",
      "offer release, cancel, retry from, unpark, outbox retry and schedule pause/resume, each behind a confirmation page",
    )
    .option(
      "--allow-host <name>",
      "also answer this host name (name or name:port), e.g. the end of an SSH tunnel or a proxy; repeatable",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .addHelpText(
      "after",
      `
It prints an address carrying a token minted for this process: only a browser that opened
that address can read the console (and, with --allow-actions, act). It answers only the
host names it listens on (127.0.0.1 and localhost by default) and those of --allow-host.
Read-only unless --allow-actions is given.

Examples:
  $ idempo console
  $ idempo console --port 8080 --allow-actions
  $ idempo console --allow-host localhost:9000   # reached through ssh -L 9000:localhost:4300`,
    )
    .action(
      async (opts: { host: string; port: number; allowActions?: boolean; allowHost: string[] }, command: Command) => {
        await withDatabase(command, async ({ engine, db, schema }) => {
          const actions = opts.allowActions === true;
          const server = await startConsole(
            {
              engine,
              actions,
              signals: (records) => deliveredSignals(db, schema, records),
              clock: async () => {
                const { rows } = await sql<{ now: Date }>`SELECT clock_timestamp() AS now`.execute(db);
                return rows[0]?.now ?? new Date();
              },
              report: (error) =>
                io.err(`console: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`),
            },
            opts.host,
            opts.port,
            opts.allowHost,
          );
          if (!LOOPBACK.has(opts.host)) {
            io.err(
              `warning: listening on ${opts.host}, not loopback: the console speaks plain HTTP, so its token crosses the network in the clear\n`,
            );
          }
          io.out(`idempo console on ${server.url} (${actions ? "actions allowed" : "read-only"})\n`);
          io.out(`open ${server.loginUrl} in your browser: the token in it is what lets a browser in\n`);
          io.out("press Ctrl-C to stop\n");
          await untilStopped();
          await server.close();
        });
      },
    );
}
