/**
 * The command line of `pnpm torture`: a standard run by default, `--long`
 * for the 10 000-run version, and knobs for everything else.
 */
import { parseArgs } from "node:util";

export interface CliOptions {
  /** `--help`: print the usage and do nothing else. */
  readonly help: boolean;
  readonly runs: number;
  readonly workers: number;
  readonly slots: number;
  readonly leaseMs: number;
  /** Faults in all, spread over the kinds (see `planFaults`). */
  readonly faults: number;
  readonly budgetMs: number;
  readonly seed: number;
  /** Use this server (never restarted) instead of starting one of our own. */
  readonly databaseUrl: string | undefined;
  readonly keepDatabase: boolean;
  /** Intents of the durable scenario run after the main one; 0 skips it. */
  readonly durableIntents: number;
  /** Parents of the fan-out scenario run after the durable one (20 children each); 0 skips it. */
  readonly fanoutParents: number;
  /** `--failover`: the failover scenario on a Patroni cluster of its own instead (see `failover/`). */
  readonly failover: boolean;
  /** Primary kills and switchovers of the failover scenario. */
  readonly primaryKills: number;
  readonly switchovers: number;
  /** Charges through the HTTP example's service in the failover scenario. */
  readonly httpIntents: number;
}

export const USAGE = `usage: pnpm torture [--help] [--long] [--runs N] [--workers N] [--slots N] [--lease-ms MS]
                    [--faults N] [--budget-minutes M] [--seed N] [--database-url URL] [--keep-database]
                    [--durable-intents N] [--fanout-parents N] [--failover [--primary-kills N] [--switchovers N] [--http-intents N]]

  --long               10 000 runs (Default: 1 000)
  --runs N             intents to run; overrides --long
  --workers N          worker processes (Default: 4)
  --slots N            calls each worker serves at once (Default: 8)
  --lease-ms MS        lease of every run (Default: 1 500)
  --faults N           faults in all (kills, terminations, pauses, zombie rounds, storms), spread
                       evenly over the intents (Default: one per 10 intents)
  --budget-minutes M   stop minting intents after M minutes and finish (Default: 18 with --long, else 10)
  --seed N             seed of the driver's choices (Default: random, printed)
  --database-url URL   run on this server (a new database on it) instead of a throwaway server of
                       our own; the server is then never restarted
  --keep-database      keep the run's database even when every check passed
  --durable-intents N  then the durable scenario: N runs that sleep, send an outbox message and wait
                       for a signal while workers are killed, signals race and an operator rewinds
                       some, then retries across retention; 0 skips it (Default: 24, 240 with --long)
  --fanout-parents N   then the fan-out scenario: N payout batches with parallel checks, each fanning out
                       20 transfers, under concurrency limits of 1-3 per key and a shared rate limit,
                       while workers are killed in fan-out and fan-in and a sampler reads the limits;
                       0 skips it (Default: 24, 120 with --long)
  --failover           the failover scenario instead: a two-node Patroni cluster behind HAProxy of its
                       own (scripts/failover/cluster.sh; it installs patroni, etcd and haproxy with
                       apt-get when missing, and exits 3 when it cannot), the same fleet and chaos plus
                       the HTTP example's service on it, while the database primary is SIGKILLed and
                       switched over; checked on the new primary; the durable scenario is skipped
  --primary-kills N    SIGKILLs of the primary's postmaster (Default: 3)
  --switchovers N      graceful switchovers, 0 for none (Default: 1)
  --http-intents N     charges through the HTTP service (Default: 100)`;

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${value}`);
  return n;
}

/** Parse `argv` (without node and the script). @throws Error with a message for the user. */
export function parseOptions(argv: readonly string[]): CliOptions {
  const { values } = parseArgs({
    // `pnpm torture -- --help` hands the separator on; flags `pnpm` would take for itself need it.
    args: argv[0] === "--" ? argv.slice(1) : [...argv],
    options: {
      help: { type: "boolean", short: "h", default: false },
      long: { type: "boolean", default: false },
      runs: { type: "string" },
      workers: { type: "string" },
      slots: { type: "string" },
      "lease-ms": { type: "string" },
      faults: { type: "string" },
      "budget-minutes": { type: "string" },
      seed: { type: "string" },
      "database-url": { type: "string" },
      "keep-database": { type: "boolean", default: false },
      "durable-intents": { type: "string" },
      "fanout-parents": { type: "string" },
      failover: { type: "boolean", default: false },
      "primary-kills": { type: "string" },
      switchovers: { type: "string" },
      "http-intents": { type: "string" },
    },
    strict: true,
  });
  const long = values.long === true;
  const runs = positive("runs", values.runs, long ? 10_000 : 1_000);
  return {
    help: values.help === true,
    runs,
    workers: positive("workers", values.workers, 4),
    slots: positive("slots", values.slots, 8),
    leaseMs: positive("lease-ms", values["lease-ms"], 1_500),
    faults: positive("faults", values.faults, Math.max(6, Math.round(runs / 10))),
    budgetMs: positive("budget-minutes", values["budget-minutes"], long ? 18 : 10) * 60_000,
    seed: positive("seed", values.seed, 1 + Math.floor(Math.random() * 2 ** 31)),
    databaseUrl: values["database-url"],
    keepDatabase: values["keep-database"] === true,
    durableIntents:
      values["durable-intents"] === "0" ? 0 : positive("durable-intents", values["durable-intents"], long ? 240 : 24),
    fanoutParents:
      values["fanout-parents"] === "0" ? 0 : positive("fanout-parents", values["fanout-parents"], long ? 120 : 24),
    failover: values.failover === true,
    primaryKills: positive("primary-kills", values["primary-kills"], 3),
    switchovers: values.switchovers === "0" ? 0 : positive("switchovers", values.switchovers, 1),
    httpIntents: positive("http-intents", values["http-intents"], 100),
  };
}
