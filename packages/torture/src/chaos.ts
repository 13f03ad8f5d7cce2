/**
 * The faults, a fixed number of each kind in a seeded order, each due once
 * a given share of the intents has been minted (never on a timer, so a slow
 * machine gets the same faults as a fast one): SIGKILL a worker now, or arm
 * it to SIGKILL itself at a named boundary; pg_terminate_backend on worker
 * connections; SIGSTOP a worker past its lease; a zombie round (a worker
 * frozen between two writes of a run, woken while its successor is held at
 * a boundary, so the zombie's write meets a run that is still in flight); a
 * duplicate storm; once per run when the suite owns the server, a
 * server restart; and, on a failover cluster, SIGKILL of the database
 * primary and switchovers. Minting waits while a due fault is not done yet.
 */
import type pg from "pg";
import { WORKER_APP_PREFIX } from "./database.ts";
import type { ClusterControl } from "./failover/cluster.ts";
import type { Intent } from "./intents.ts";
import type { Random } from "./random.ts";
import type { Fleet, WorkerProcess, ZombieEvent } from "./worker-fleet.ts";
import { HOOK_POINTS, ZOMBIE_POINTS } from "./workflows/catalogue.ts";

/** How many faults of each kind one run makes. */
export interface FaultPlan {
  readonly kill: number;
  readonly armedKill: number;
  readonly terminate: number;
  readonly pause: number;
  readonly zombie: number;
  readonly storm: number;
  /** SIGKILL of the database primary's postmaster (needs `cluster`). */
  readonly failover?: number;
  /** A graceful switchover of the database primary (needs `cluster`). */
  readonly switchover?: number;
}
type FaultKind = keyof FaultPlan;

const WEIGHTS: Required<Omit<FaultPlan, "failover" | "switchover">> = {
  kill: 12,
  armedKill: 12,
  terminate: 20,
  pause: 16,
  zombie: 16,
  storm: 24,
};

/** `total` faults spread over the kinds by the usual weights, at least one of each. */
export function planFaults(total: number): FaultPlan {
  const sum = Object.values(WEIGHTS).reduce((a, b) => a + b, 0);
  const share = (k: keyof typeof WEIGHTS) => Math.max(1, Math.round((total * WEIGHTS[k]) / sum));
  return {
    kill: share("kill"),
    armedKill: share("armedKill"),
    terminate: share("terminate"),
    pause: share("pause"),
    zombie: share("zombie"),
    storm: share("storm"),
  };
}

/** What the chaos did, summed. */
export interface ChaosCounters {
  /** Immediate SIGKILLs sent by the driver. */
  killsSent: number;
  /** Workers told to SIGKILL themselves at a boundary. */
  killsArmed: number;
  /** Backends pg_terminate_backend ended. */
  terminated: number;
  pauses: number;
  /** Zombie rounds completed: a frozen zombie woke while its successor was held, and tried its write. */
  zombies: number;
  /**
   * Zombie rounds that made no zombie: no attempt of the round's intent
   * reached the freeze point in time (a kill or a slow machine in between),
   * or no successor or try came. Logged; the round is not made again.
   */
  zombieMisses: number;
  storms: number;
  restarts: number;
  /** Database primaries killed (SIGKILL of the postmaster) and switchovers made. */
  primaryKills: number;
  switchovers: number;
}

/** A server the suite may stop and start (never a shared one). */
export interface Restartable {
  restart(): Promise<void>;
}

export interface ChaosOptions {
  readonly fleet: Fleet;
  readonly rng: Random;
  /** The driver's own pool, for pg_terminate_backend; its connections are never victims. */
  readonly pool: pg.Pool;
  readonly leaseMs: number;
  readonly plan: FaultPlan;
  /** Intents the run mints in all; fault i is due once `(i + 1) / (faults + 1)` of them are minted. */
  readonly target: number;
  /** Intents minted so far. */
  readonly minted: () => number;
  /** Fire a duplicate storm; the driver knows which keys are worth storming. False: nothing to storm yet. */
  readonly storm: () => boolean;
  /** A zombie round's intent, sent to `worker`, freezing at `point`. */
  readonly zombie: (worker: WorkerProcess, point: string) => Intent;
  /** Present only when the server belongs to this run. */
  readonly server?: Restartable | undefined;
  /** Restart once this returns true (checked before each fault; once per run). */
  readonly restartDue: () => boolean;
  /** The database cluster, for the `failover` and `switchover` faults. */
  readonly cluster?: ClusterControl | undefined;
  /** Awaited right before the primary is killed or switched over (to have other load in flight then). */
  readonly beforeFailover?: (() => Promise<void>) | undefined;
  readonly log: (line: string) => void;
}

/** Waits the chaos gives a round's events: only a broken build or a stuck process ever reaches them. */
const ROUND_DEADLINE_MS = 120_000;

export class Chaos {
  readonly counters: ChaosCounters = {
    killsSent: 0,
    killsArmed: 0,
    terminated: 0,
    pauses: 0,
    zombies: 0,
    zombieMisses: 0,
    storms: 0,
    restarts: 0,
    primaryKills: 0,
    switchovers: 0,
  };
  readonly #o: ChaosOptions;
  readonly #order: FaultKind[];
  #next = 0;
  #stopped = false;
  #loop: Promise<void> = Promise.resolve();
  /** Listeners for a zombie round's worker messages. */
  #waiters: ((worker: WorkerProcess, event: ZombieEvent) => boolean)[] = [];

  constructor(options: ChaosOptions) {
    this.#o = options;
    const order = (Object.keys(options.plan) as FaultKind[]).flatMap((k) =>
      Array<FaultKind>(options.plan[k] ?? 0).fill(k),
    );
    // Seeded shuffle: the same seed gives the same sequence of faults.
    for (let i = order.length - 1; i > 0; i--) {
      const j = options.rng.below(i + 1);
      [order[i], order[j]] = [order[j] as FaultKind, order[i] as FaultKind];
    }
    this.#order = order;
  }

  /** The share of the planned faults made so far, 0 to 1. */
  get progress(): number {
    return this.#order.length === 0 ? 1 : this.#next / this.#order.length;
  }

  /** Every planned fault has been made. */
  get done(): boolean {
    return this.#next >= this.#order.length;
  }

  /**
   * How many intents may be minted now: up to a little past the point where
   * the next fault is due, and never into the intents the zombie rounds still
   * to come will mint themselves.
   */
  mintLimit(): number {
    const reserved = this.#order.slice(this.#next).filter((k) => k === "zombie").length;
    const cap = this.#o.target - reserved;
    if (this.done) return cap;
    const slack = Math.max(4, this.#o.fleet.alive().length * 2);
    return Math.min(cap, this.#dueAt(this.#next) + slack);
  }

  start(): void {
    this.#loop = this.#run().catch((error: unknown) => {
      this.#o.log(`chaos stopped: ${error instanceof Error ? error.message : String(error)}`);
    });
  }

  /** Stop making faults, wait for the one in progress, and wake every paused worker. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    for (const w of this.#o.fleet.alive()) this.#o.fleet.resume(w);
  }

  /** A zombie round's message from a worker (frozen, held, zombie-tried). */
  onZombieEvent(worker: WorkerProcess, event: ZombieEvent): void {
    let wanted = false;
    for (const waiter of [...this.#waiters]) wanted = waiter(worker, event) || wanted;
    // A worker that froze for no round (a late retry of a finished round's intent) must not sleep forever.
    if (!wanted && event.type === "frozen") this.#o.fleet.resume(worker);
  }

  #dueAt(i: number): number {
    return Math.floor(((i + 1) * this.#o.target) / (this.#order.length + 1));
  }

  async #run(): Promise<void> {
    let restarted = this.#o.server === undefined;
    let failed = "";
    while (!this.#stopped && !this.done) {
      if (this.#o.minted() < this.#dueAt(this.#next)) {
        await sleep(20);
        continue;
      }
      if (!restarted && this.#o.restartDue()) {
        restarted = true;
        await this.#restart(this.#o.server as Restartable);
        continue;
      }
      const kind = this.#order[this.#next] as FaultKind;
      let made = false;
      try {
        made = await this.#fault(kind);
        failed = "";
      } catch (error) {
        // Tried again shortly; while the database fails over, the same error comes every time: said once.
        const why = `chaos (${kind}): ${error instanceof Error ? error.message : String(error)}`;
        if (why !== failed) this.#o.log(why);
        failed = why;
      }
      if (made) this.#next++;
      // Not possible right now (no victim yet, a worker still starting): try again shortly.
      else await sleep(50);
    }
  }

  /** Make one fault of `kind`; false when it could not be made now. */
  async #fault(kind: FaultKind): Promise<boolean> {
    const { fleet, rng } = this.#o;
    switch (kind) {
      case "kill": {
        // Any worker that has started, paused ones included (a zombie that never wakes).
        const victim = rng.pick(fleet.alive().filter((w) => w.state !== "starting"));
        if (!victim) return false;
        fleet.kill(victim);
        this.counters.killsSent++;
        return true;
      }
      case "armedKill": {
        const victim = rng.pick(fleet.ready());
        const point = rng.pick(HOOK_POINTS);
        if (!victim || !point) return false;
        fleet.send(victim, { type: "arm", point });
        this.counters.killsArmed++;
        return true;
      }
      case "terminate":
        return this.#terminate(1 + rng.below(3));
      case "pause": {
        // A worker with runs in hand, so its clients time out, retry elsewhere and take over.
        const ready = fleet.ready();
        const victim = rng.pick(ready.filter((w) => w.calls.size > 0)) ?? rng.pick(ready);
        if (!victim || ready.length < 2) return false;
        fleet.pause(victim, Math.round(this.#o.leaseMs * rng.between(1.5, 3)));
        this.counters.pauses++;
        return true;
      }
      case "zombie":
        return this.#zombieRound();
      case "storm":
        if (!this.#o.storm()) return false;
        this.counters.storms++;
        return true;
      case "failover":
      case "switchover":
        return this.#failover(kind);
    }
  }

  /**
   * Kill the database primary (or switch it over), from a settled cluster:
   * a leader with its synchronous standby, so that the standby has every
   * commit acknowledged before the kill. The workers, their relays and the
   * clients carry on through it; nothing is restarted.
   */
  async #failover(kind: "failover" | "switchover"): Promise<boolean> {
    const { cluster, log } = this.#o;
    if (!cluster) throw new Error(`a ${kind} fault needs the cluster`);
    await cluster.settle();
    await this.#o.beforeFailover?.();
    if (kind === "failover") {
      log(`chaos: SIGKILL of the primary's postmaster on ${await cluster.killPrimary()}`);
      this.counters.primaryKills++;
    } else {
      log(`chaos: switchover; ${await cluster.switchover()} leads now`);
      this.counters.switchovers++;
    }
    return true;
  }

  /** Resolve with the first worker message that `match` accepts, or undefined after the deadline. */
  #waitFor<T>(match: (worker: WorkerProcess, event: ZombieEvent) => T | undefined): Promise<T | undefined> {
    return new Promise((resolve) => {
      const waiter = (worker: WorkerProcess, event: ZombieEvent) => {
        const value = match(worker, event);
        if (value === undefined) return false;
        finish(value);
        return true;
      };
      const timer = setTimeout(() => finish(undefined), ROUND_DEADLINE_MS);
      const finish = (value: T | undefined) => {
        clearTimeout(timer);
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(value);
      };
      this.#waiters.push(waiter);
    });
  }

  /**
   * A zombie round. A fresh intent runs until a phase boundary, where its
   * worker freezes itself (SIGSTOP) with the run half done. Its client times
   * out and retries elsewhere; once the lease has run out, that retry (or a
   * background resumer) takes the run over and is held at its first
   * boundary. Only then is the zombie woken: its next write meets a run that
   * is in flight under another owner, which is exactly what fencing must
   * refuse. When the zombie has tried, the successor goes on.
   */
  async #zombieRound(): Promise<boolean> {
    const { fleet, rng, log } = this.#o;
    const ready = fleet.ready();
    const first = rng.pick(ready);
    const point = rng.pick(ZOMBIE_POINTS);
    if (!first || !point || ready.length < 2) return false;
    // Worker messages are handled on a later turn of the event loop: listening after the send misses nothing.
    const intent = this.#o.zombie(first, point);
    const sameKey = (e: ZombieEvent) => e.key === intent.key && e.tenantId === intent.tenantId;
    const frozen = await this.#waitFor((w, e) => (e.type === "frozen" && sameKey(e) ? { w, e } : undefined));
    intent.freezeAt = undefined;
    if (!frozen) {
      log(`zombie round on ${intent.tenantId}/${intent.key}: no attempt reached ${point}`);
      this.counters.zombieMisses++;
      return true;
    }
    const { w: zombie, e } = frozen;
    const heldP = this.#waitFor((w, ev) => (ev.type === "held" && sameKey(ev) ? w : undefined));
    fleet.broadcast({ type: "hold", tenantId: intent.tenantId, key: intent.key, afterAttempt: e.attempt }, zombie);
    const successor = await heldP;
    const triedP = this.#waitFor((w, ev) =>
      ev.type === "zombie-tried" && sameKey(ev) && w === zombie ? ev : undefined,
    );
    fleet.resume(zombie);
    const tried = successor ? await triedP : undefined;
    fleet.broadcast({ type: "release", tenantId: intent.tenantId, key: intent.key });
    if (successor && tried) this.counters.zombies++;
    else this.counters.zombieMisses++;
    if (!(successor && tried))
      log(
        `zombie round on ${intent.tenantId}/${intent.key}: ${successor ? "the zombie never tried" : "no successor was held"}`,
      );
    return true;
  }

  /** End 1-3 random worker connections in this database; the driver's own are never picked. */
  async #terminate(n: number): Promise<boolean> {
    const { rows } = await this.#o.pool.query<{ ended: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ended FROM (
         SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE $1
         ORDER BY random() LIMIT $2
       ) AS victims`,
      [`${WORKER_APP_PREFIX}%`, n],
    );
    const ended = rows.filter((r) => r.ended).length;
    this.counters.terminated += ended;
    return ended > 0;
  }

  async #restart(server: Restartable): Promise<void> {
    this.#o.log("chaos: restarting the PostgreSQL server");
    const started = Date.now();
    await server.restart();
    this.counters.restarts++;
    this.#o.log(`chaos: server back after ${Date.now() - started} ms`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
