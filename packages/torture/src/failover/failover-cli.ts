/**
 * `pnpm torture --failover`: bring the test bed up, run the failover
 * scenario on it, take it down, print one line. Exit codes: 0 passed, 1 a
 * check failed, 3 the cluster cannot be had on this machine (said loudly,
 * as the script says it).
 */
import { planFaults } from "../chaos.ts";
import type { CliOptions } from "../options.ts";
import { clusterDown, clusterUp, testBed } from "./cluster.ts";
import { failoverDetails, failoverPassed, failoverSummaryLine } from "./failover-report.ts";
import { runFailover } from "./failover-scenario.ts";

/** Run the scenario as the command line asks; resolves with the exit code. */
export async function failoverCli(options: CliOptions, log: (line: string) => void): Promise<number> {
  log("bringing up the failover cluster (scripts/failover/cluster.sh up)");
  const up = clusterUp();
  if ("unavailable" in up) {
    log(`THE FAILOVER SCENARIO DID NOT RUN: the cluster cannot be had on this machine:\n${up.unavailable}`);
    return 3;
  }
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      log(`${signal}: taking the cluster down`);
      clusterDown();
      process.exit(130);
    });
  }
  // A failed run keeps the cluster up, so that its kept databases can be read.
  let keep = options.keepDatabase;
  try {
    const report = await runFailover({
      cluster: testBed,
      frontUrl: up.url,
      runs: options.runs,
      workers: options.workers,
      slots: options.slots,
      leaseMs: options.leaseMs,
      faults: { ...planFaults(options.faults), failover: options.primaryKills, switchover: options.switchovers },
      httpIntents: options.httpIntents,
      seed: options.seed,
      keepDatabase: options.keepDatabase,
      log,
    });
    for (const line of failoverDetails(report)) log(line);
    process.stdout.write(`${failoverSummaryLine(report)}\n`);
    if (!failoverPassed(report)) keep = true;
    return failoverPassed(report) ? 0 : 1;
  } catch (error) {
    keep = true;
    throw error;
  } finally {
    if (keep) log(`the cluster stays up for inspection (${up.url}); scripts/failover/cluster.sh down ends it`);
    else clusterDown();
  }
}
