/** `idempo console`: a small web console for stuck, in-flight and recent runs, one run's timeline, and the outbox. */

import type { Command } from "commander";
import { Option } from "commander";
import { sql } from "kysely";
import { withDatabase } from "../connection.js";
import { mintToken } from "../console/auth.js";
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
    .description("serve a web console: stuck, parked, suspended and recent runs, run timelines, the outbox")
    .addOption(new Option("--host <address>", "address to listen on").default("127.0.0.1"))
    .addOption(new Option("--port <port>", "port to listen on (0 picks a free one)").default(4300).argParser(parsePort))
    .option(
      "--allow-actions",
      "offer release, cancel, retry from, unpark and outbox retry, each behind a confirmation and the token printed here",
    )
    .addHelpText(
      "after",
      `
Read-only unless --allow-actions is given. With it, the console prints an address carrying a
one-time token; only a browser that opened that address can perform actions.

Examples:
  $ idempo console
  $ idempo console --port 8080 --allow-actions`,
    )
    .action(async (opts: { host: string; port: number; allowActions?: boolean }, command: Command) => {
      await withDatabase(command, async ({ engine, db, schema }) => {
        const token = opts.allowActions ? mintToken() : null;
        const server = await startConsole(
          {
            engine,
            token,
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
        );
        if (!LOOPBACK.has(opts.host)) {
          io.err(`warning: listening on ${opts.host}, not loopback: anyone who reaches it can read every run\n`);
        }
        io.out(`idempo console on ${server.url} (${token ? "actions allowed" : "read-only"})\n`);
        if (token) io.out(`open ${server.url}/?token=${token} to enable actions in this browser\n`);
        io.out("press Ctrl-C to stop\n");
        await untilStopped();
        await server.close();
      });
    });
}
