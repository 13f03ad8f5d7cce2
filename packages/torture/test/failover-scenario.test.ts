/**
 * The failover scenario in its short form, as CI runs it: the fleet (two
 * worker processes with their relays and a resumer, clients, a worker
 * kill, a terminated connection and a duplicate storm) and the HTTP
 * example's service, on a two-node Patroni cluster behind HAProxy, while
 * the primary's postmaster is SIGKILLed once. Checked on the new primary:
 * nothing duplicated, nothing lost, every answer stored as given, no run
 * in flight, no application process restarted. The full form is
 * `pnpm torture --failover` (docs/reliability.md).
 *
 * Runs in CI (`CI` set) or with IDEMPO_FAILOVER=1; IDEMPO_FAILOVER=0 turns
 * it off. Where the cluster cannot be had (no root or apt-get to install
 * Patroni, etcd and HAProxy: the script's exit 3) it is skipped, saying so
 * loudly. Its cluster has ports of its own (15460 and up), so that it never
 * meets test/failover.test.ts's.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClusterUp } from "../src/failover/cluster.ts";
import { clusterDown, clusterStatus, clusterUp, testBed } from "../src/failover/cluster.ts";
import { failoverDetails, failoverSummaryLine } from "../src/failover/failover-report.ts";
import { runFailover } from "../src/failover/failover-scenario.ts";

const ENABLED = process.env.IDEMPO_FAILOVER === "1" || (process.env.IDEMPO_FAILOVER !== "0" && Boolean(process.env.CI));
process.env.IDEMPO_FAILOVER_PORT = "15460";

const RUNS = 40;
const HTTP_INTENTS = 20;

let up: ClusterUp | undefined;

describe.skipIf(!ENABLED)("failover scenario, short form (CI, or IDEMPO_FAILOVER=1)", () => {
  beforeAll(() => {
    up = clusterUp();
  }, 600_000);
  afterAll(() => {
    if (up && "url" in up) clusterDown();
  }, 120_000);

  it("one primary killed under the fleet and the HTTP service: nothing duplicated, nothing lost", async (ctx) => {
    if (!up || "unavailable" in up) {
      const why = up && "unavailable" in up ? up.unavailable : "";
      console.warn(`\n*** SKIPPED: the failover cluster cannot be had on this machine ***\n${why}\n`);
      ctx.skip(`the failover cluster cannot be had here: ${why}`);
      return;
    }
    const log: string[] = [];
    const report = await runFailover({
      cluster: testBed,
      frontUrl: up.url,
      runs: RUNS,
      workers: 2,
      slots: 6,
      leaseMs: 1_500,
      faults: { kill: 1, armedKill: 0, terminate: 1, pause: 0, zombie: 0, storm: 1, failover: 1 },
      httpIntents: HTTP_INTENTS,
      seed: 1 + Math.floor(Math.random() * 2 ** 31),
      log: (line) => log.push(line),
    });
    console.log(failoverSummaryLine(report));
    for (const line of failoverDetails(report)) console.log(line);
    if (report.main.problems.length + report.http.problems.length > 0) console.log(log.join("\n"), clusterStatus());

    expect(report.main.chaos.primaryKills).toBe(1);
    expect(report.main.runs).toBe(RUNS);
    expect(report.http.answered).toBe(HTTP_INTENTS);
    expect(report.main.duplicateEffects + report.http.duplicateEffects).toBe(0);
    expect(report.main.lostIntents + report.http.lostIntents).toBe(0);
    expect(report.main.otherViolations + report.http.otherViolations).toBe(0);
    expect([...report.main.problems, ...report.http.problems]).toEqual([]);
  }, 600_000);
});
