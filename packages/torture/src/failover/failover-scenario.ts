/**
 * The failover scenario: everything of the fleet's torture run (worker
 * processes serving clients, their outbox relays and resumers, chaos of
 * every kind) plus the HTTP example's service, all on a database cluster
 * behind its front, while the database primary is killed (SIGKILL of its
 * postmaster) and switched over. The application processes are never
 * restarted for it: a worker or the service that exits on its own is a
 * violation. Then, on the new primary itself: every answer a client got is
 * stored as it was given, no effect is there twice (orders, ledger,
 * provider operations by derived key, outbox deliveries by delivery key,
 * charges and card authorizations), no intent is lost and no run is left
 * in flight.
 *
 * The work is bounded by counts: the faults are due by intents minted,
 * the HTTP charges by the fleet's progress; only hangs reach the timeouts.
 */
import { createDatabase, dropDatabase, uniqueName } from "../../../testkit/src/index.ts";
import type { FaultPlan } from "../chaos.ts";
import { runTorture } from "../driver.ts";
import { Random } from "../random.ts";
import type { ClusterControl } from "./cluster.ts";
import type { FailoverReport } from "./failover-report.ts";
import { failoverPassed } from "./failover-report.ts";
import type { CallerTally, Charge } from "./http-service.ts";
import { chargeUntilAnswered, mintCharges, startHttpService } from "./http-service.ts";
import { judgeCharges } from "./http-verdict.ts";

export interface FailoverOptions {
  readonly cluster: ClusterControl;
  /** The cluster's front (maintenance database); each half makes a database of its own there. */
  readonly frontUrl: string;
  /** Intents of the fleet. */
  readonly runs: number;
  readonly workers: number;
  readonly slots: number;
  readonly leaseMs: number;
  /** Faults of the fleet's chaos, `failover` (primary kills) and `switchover` among them. */
  readonly faults: FaultPlan;
  /** Charges made through the HTTP service, spread over the fleet's run. */
  readonly httpIntents: number;
  readonly seed: number;
  readonly keepDatabase?: boolean;
  readonly progressEveryMs?: number;
  readonly log: (line: string) => void;
}

/** How long a burst of charges runs before its primary kill or switchover, ms. */
const BURST_LEAD_MS = 150;
/** Callers of the HTTP service working at once. */
const HTTP_LANES = 4;
/** The longest the HTTP callers take after the fleet is done: only a hang reaches it. */
const HTTP_DEADLINE_MS = 300_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Run the scenario; the cluster must be up (and is left up). */
export async function runFailover(options: FailoverOptions): Promise<FailoverReport> {
  const started = Date.now();
  const { log } = options;
  const serviceDb = uniqueName("idempo_http");
  const serviceUrl = await createDatabase(options.frontUrl, serviceDb);
  const service = await startHttpService(serviceUrl);
  log(`http: the example's service on ${service.url} (pid ${service.child.pid}), database ${serviceDb}`);

  // Half the charges start as the fleet's run goes (by intents settled and faults made); the other half
  // in bursts, one started just before each primary kill and switchover, so that they meet it in flight.
  const disruptive = (options.faults.failover ?? 0) + (options.faults.switchover ?? 0);
  const perBurst = disruptive === 0 ? 0 : Math.floor(options.httpIntents / 2 / disruptive);
  const spread = options.httpIntents - perBurst * disruptive;
  let bursts = 0;
  const charges: Charge[] = mintCharges(options.httpIntents, new Random(options.seed + 2), `fo-${options.seed}`);
  const tally: CallerTally = { requests: 0, inProgress: 0, unavailable: 0, noAnswer: 0, unexpected: [] };
  let progress = 0;
  let fleetDone = false;
  let next = 0;
  // No end while the fleet runs; a bound once it is done.
  let httpDeadline = Number.MAX_SAFE_INTEGER;
  const lane = async () => {
    for (;;) {
      const i = next;
      if (i >= charges.length) return;
      if (!fleetDone && i >= Math.floor(progress * spread) + bursts * perBurst) {
        await sleep(50);
        continue;
      }
      next++;
      await chargeUntilAnswered(service.url, charges[i] as Charge, tally, () => httpDeadline);
    }
  };
  const callers = Promise.all(Array.from({ length: HTTP_LANES }, lane));

  let clean = false;
  try {
    const main = await runTorture({
      serverUrl: options.frontUrl,
      runs: options.runs,
      workers: options.workers,
      slots: options.slots,
      leaseMs: options.leaseMs,
      faults: options.faults,
      seed: options.seed,
      keepDatabase: options.keepDatabase ?? false,
      ...(options.progressEveryMs === undefined ? {} : { progressEveryMs: options.progressEveryMs }),
      operators: false,
      cluster: options.cluster,
      onProgress: (done) => {
        progress = done;
      },
      beforeFailover: async () => {
        bursts++;
        // Long enough for the burst's first charges to be in their phases and steps when the primary goes.
        await sleep(BURST_LEAD_MS);
      },
      log,
    });
    fleetDone = true;
    httpDeadline = Date.now() + HTTP_DEADLINE_MS;
    await callers;
    const http = await judgeCharges(charges, tally, {
      leaderUrl: await options.cluster.leaderUrl(serviceDb),
      serviceUrl: service.url,
      exits: service.exits(),
    });
    if (http.otherViolations > 0 && service.exits() > 0) log(`http service stderr:\n${service.stderr()}`);
    const report: FailoverReport = { main, http, seconds: Math.round((Date.now() - started) / 1000) };
    clean = failoverPassed(report);
    return report;
  } finally {
    fleetDone = true;
    // After a failure, the callers stop at once.
    httpDeadline = Math.min(httpDeadline, Date.now());
    await callers.catch(() => undefined);
    await service.stop();
    if (clean && !options.keepDatabase) await dropDatabase(options.frontUrl, serviceDb);
    else log(`kept database ${serviceDb} for inspection`);
  }
}
