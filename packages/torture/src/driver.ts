/**
 * One torture run from start to verdict: a fresh database on the given
 * server, a fleet of worker processes serving clients, chaos until every
 * intent has an answer or a client that gave up, then the clean-up an
 * operator would do (`resumeStale`, a relay) and the check against ground
 * truth.
 */
import { createDatabase, dropDatabase, uniqueName } from "../../testkit/src/index.ts";
import type { FaultPlan } from "./chaos.ts";
import { Chaos } from "./chaos.ts";
import { Clients } from "./clients.ts";
import { installSchema, openPool } from "./database.ts";
import type { ClusterControl } from "./failover/cluster.ts";
import { finish } from "./finish.ts";
import { IntentBook } from "./intents.ts";
import type { OperatorScenarioOptions, OperatorVerdict } from "./operator-scenario.ts";
import { runOperatorScenario } from "./operator-scenario.ts";
import type { OwnedServer } from "./owned-server.ts";
import { Random } from "./random.ts";
import type { Report } from "./report.ts";
import { verify } from "./verify.ts";
import { Fleet } from "./worker-fleet.ts";

export interface TortureOptions {
  /** Maintenance URL of the server; the run creates (and afterwards drops) its own database there. */
  readonly serverUrl: string;
  /** Present when the run owns the server: then it is restarted once, halfway. */
  readonly server?: OwnedServer | undefined;
  /** Intents to run. */
  readonly runs: number;
  /** Worker processes. */
  readonly workers: number;
  /** Calls each worker serves at once. */
  readonly slots: number;
  /** Lease of every run, in ms; short, so zombies and takeovers are frequent. */
  readonly leaseMs: number;
  /** How many faults of each kind the run makes, spread over the intents. */
  readonly faults: FaultPlan;
  /**
   * Stop minting intents after this long and finish with what was minted, in
   * ms (Default: no limit). For a person at a terminal; a test bounds the work instead.
   */
  readonly budgetMs?: number | undefined;
  readonly seed: number;
  /** Keep the database afterwards even when every check passed. */
  readonly keepDatabase?: boolean;
  /** Progress and diagnostics (stderr in the CLI). */
  readonly log: (line: string) => void;
  /** Progress line interval in ms (Default: 10 000). */
  readonly progressEveryMs?: number;
  /**
   * The operator scenario run after the fleet's (poison runs and operator verbs racing live
   * owners, in a database of its own), or `false` to skip it
   * (Default: 30 good checkouts, 4 poison runs, at least 150 operator actions, a 400 ms lease
   * so that verbs meet live owners and stuck runs alike).
   */
  readonly operators?: Pick<OperatorScenarioOptions, "good" | "poison" | "actions" | "leaseMs"> | false;
  /**
   * The database is a failover cluster behind a front (`serverUrl`): the
   * `failover` and `switchover` faults kill or switch its primary, the
   * workers' relays and resumers LISTEN (and must LISTEN again on the new
   * primary), a worker that exits on its own counts as a violation (nothing
   * may need a restart), and the verdict reads the leader itself.
   */
  readonly cluster?: ClusterControl | undefined;
  /**
   * Called as the run goes with how far it is, 0 to 1: the larger of the
   * share of intents answered (or given up) and the share of faults made.
   * To pace other load by: it moves on at a fault even while the intents
   * stall on it (a failover).
   */
  readonly onProgress?: (done: number) => void;
  /** Awaited right before each primary kill or switchover (to have other load in flight at it). */
  readonly beforeFailover?: () => Promise<void>;
}

const OPERATORS = { good: 30, poison: 4, actions: 150, leaseMs: 400 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runTorture(options: TortureOptions): Promise<Report> {
  const started = Date.now();
  const { log } = options;
  const name = uniqueName("idempo_torture");
  const url = await createDatabase(options.serverUrl, name);
  await installSchema(url);
  log(
    `database ${name}; ${options.workers} workers x ${options.slots} slots, lease ${options.leaseMs} ms, seed ${options.seed}`,
  );

  const rng = new Random(options.seed);
  const book = new IntentBook(Date.now().toString(36), rng);
  const driverPool = openPool(url, "idempo-torture-driver", 2);
  let fencedInBackground = 0;
  let kills = 0;
  const crashes: string[] = [];
  let stopping = false;
  let clients: Clients | undefined;
  let chaos: Chaos | undefined;
  const fleet = new Fleet({
    size: options.workers,
    databaseUrl: url,
    leaseMs: options.leaseMs,
    relayLeaseMs: options.leaseMs * 2,
    listen: options.cluster !== undefined,
    onResult: (callId, outcomes) => clients?.onResult(callId, outcomes),
    onFenced: (count) => {
      fencedInBackground += count;
    },
    onExit: (worker, exitSignal, calls) => {
      if (!stopping && exitSignal === "SIGKILL") kills++;
      // Anything but our own SIGKILL is a crash worth reading about.
      else if (!stopping) {
        const how = `worker ${worker.index} exited on its own (${exitSignal ?? `code ${worker.child.exitCode}`})`;
        log(how);
        if (options.cluster) crashes.push(how);
      }
      clients?.onWorkerExit(worker, calls);
    },
    onZombieEvent: (worker, event) => chaos?.onZombieEvent(worker, event),
  });
  clients = new Clients({
    fleet,
    book,
    rng,
    leaseMs: options.leaseMs,
    slots: options.slots,
    target: options.runs,
    mintLimit: () => chaos?.mintLimit() ?? 0,
  });
  chaos = new Chaos({
    fleet,
    rng,
    pool: driverPool,
    leaseMs: options.leaseMs,
    plan: options.faults,
    target: options.runs,
    minted: () => book.intents.length,
    storm: () => clients?.storm() ?? false,
    zombie: (worker, point) => (clients as Clients).zombie(worker, point),
    server: options.server,
    restartDue: () => book.settled >= options.runs / 2,
    cluster: options.cluster,
    beforeFailover: options.beforeFailover,
    log,
  });

  let report: Report | undefined;
  try {
    await fleet.start();
    chaos.start();
    const tick = setInterval(() => {
      clients?.dispatch();
      options.onProgress?.(Math.max(book.settled / options.runs, chaos?.progress ?? 0));
    }, 50);
    const progress = setInterval(() => {
      const c = chaos.counters;
      log(
        `${book.settled}/${options.runs} settled, ${kills} kills, ${c.terminated} terminated, ${c.pauses} pauses, ` +
          `${c.zombies} zombie rounds, ${c.storms} storms, ${Math.round((Date.now() - started) / 1000)} s`,
      );
    }, options.progressEveryMs ?? 10_000);
    try {
      while (!clients.allSent || !chaos.done) {
        if (options.budgetMs !== undefined && Date.now() - started > options.budgetMs) {
          log(`time budget spent after ${book.intents.length} intents`);
          break;
        }
        await sleep(50);
      }
    } finally {
      clearInterval(tick);
      clearInterval(progress);
      await chaos.stop();
      // The last fault: the whole fleet dies at once, with the last intents in hand.
      // Their clients give up, and what they started is left for resumeStale.
      stopping = true;
      log(`${book.intents.length} intents sent (${book.settled} answered or given up): killing every worker`);
      clients.abandonAll();
      await fleet.stopAll();
    }
    const end = await finish({ url, leaseMs: options.leaseMs, book, log });
    // On a cluster: the new primary itself, not whatever the front routes to.
    const verdictPool = options.cluster
      ? openPool(await options.cluster.leaderUrl(name), "idempo-torture-verify", 2)
      : driverPool;
    let verdict: Awaited<ReturnType<typeof verify>>;
    try {
      verdict = await verify(verdictPool, book, end.replays);
    } finally {
      if (verdictPool !== driverPool) await verdictPool.end();
    }
    let operators: OperatorVerdict | undefined;
    if (options.operators !== false) {
      log("operator scenario: poison runs and operator verbs racing live owners");
      operators = await runOperatorScenario({
        serverUrl: options.serverUrl,
        ...(options.operators ?? OPERATORS),
        rng,
        keepDatabase: options.keepDatabase,
        log,
      });
    }
    const stats = book.stats;
    report = {
      runs: book.intents.length,
      target: options.runs,
      kills,
      takeovers: verdict.takeovers,
      fenced: stats.leaseLost + fencedInBackground,
      refusedByConstraint: stats.uniqueViolations,
      duplicatesSeen: stats.replays + stats.inProgress,
      duplicateEffects: verdict.duplicateEffects + (operators?.duplicateEffects ?? 0),
      lostIntents: verdict.lostIntents + (operators?.lostIntents ?? 0),
      otherViolations:
        verdict.otherViolations +
        book.violations.length +
        end.problems.length +
        crashes.length +
        (operators?.otherViolations ?? 0),
      chaos: { ...chaos.counters },
      operators,
      resumedAtEnd: end.resumed,
      retriedAtEnd: end.retried,
      providerCalls: verdict.providerCalls,
      providerOperations: verdict.providerOperations,
      deliveries: verdict.deliveries,
      messages: verdict.messages,
      clientErrors: {
        inProgress: stats.inProgress,
        leaseLost: stats.leaseLost,
        unavailable: stats.unavailable,
        inDoubt: stats.inDoubt,
        providerUnavailable: stats.providerUnavailable,
      },
      unexpected: [...stats.unexpected].map(([code, { count, sample }]) => ({ code, count, sample })),
      problems: [...book.violations, ...crashes, ...verdict.problems, ...end.problems, ...(operators?.problems ?? [])],
      seconds: Math.round((Date.now() - started) / 1000),
      database: name,
    };
    return report;
  } finally {
    await driverPool.end();
    const clean = report !== undefined && report.duplicateEffects + report.lostIntents + report.otherViolations === 0;
    if (clean && !options.keepDatabase) await dropDatabase(options.serverUrl, name);
    else log(`kept database ${name} for inspection`);
  }
}
