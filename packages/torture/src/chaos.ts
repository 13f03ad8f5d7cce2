/**
 * The faults, one at a time at random intervals: SIGKILL a worker now, or
 * arm it to SIGKILL itself at a named boundary; pg_terminate_backend on
 * worker connections; SIGSTOP a worker past its lease so it wakes as a
 * zombie; a duplicate storm; and, once per run when the suite owns the
 * server, a server restart.
 */
import type pg from "pg";
import { WORKER_APP_PREFIX } from "./database.ts";
import type { Random } from "./random.ts";
import type { Fleet } from "./worker-fleet.ts";
import { HOOK_POINTS } from "./workflows/catalogue.ts";

/** What the chaos did, summed. */
export interface ChaosCounters {
  /** Immediate SIGKILLs sent by the driver. */
  killsSent: number;
  /** Workers told to SIGKILL themselves at a boundary. */
  killsArmed: number;
  /** Backends pg_terminate_backend ended. */
  terminated: number;
  pauses: number;
  storms: number;
  restarts: number;
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
  /** Mean pause between two faults, in ms. */
  readonly meanIntervalMs: number;
  /** Fire a duplicate storm; the driver knows which keys are worth storming. */
  readonly storm: () => void;
  /** Present only when the server belongs to this run. */
  readonly server?: Restartable | undefined;
  /** Restart once this returns true (checked before each fault). */
  readonly restartDue: () => boolean;
  readonly log: (line: string) => void;
}

const WEIGHTS = { kill: 14, armedKill: 14, terminate: 24, pause: 24, storm: 24 } as const;

export class Chaos {
  readonly counters: ChaosCounters = {
    killsSent: 0,
    killsArmed: 0,
    terminated: 0,
    pauses: 0,
    storms: 0,
    restarts: 0,
  };
  readonly #o: ChaosOptions;
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: ChaosOptions) {
    this.#o = options;
  }

  start(): void {
    this.#schedule();
  }

  /** Stop scheduling faults, wait for the one in progress, and wake every paused worker. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#busy;
    for (const w of this.#o.fleet.alive()) this.#o.fleet.resume(w);
  }

  #schedule(): void {
    if (this.#stopped) return;
    const delay = this.#o.rng.between(0.3, 1.7) * this.#o.meanIntervalMs;
    this.#timer = setTimeout(() => {
      this.#busy = this.#fault()
        .catch((error: unknown) => this.#o.log(`chaos: ${error instanceof Error ? error.message : String(error)}`))
        .finally(() => this.#schedule());
    }, delay);
  }

  async #fault(): Promise<void> {
    if (this.#o.server && this.counters.restarts === 0 && this.#o.restartDue()) return this.#restart(this.#o.server);
    const { fleet, rng } = this.#o;
    switch (rng.weighted(WEIGHTS)) {
      case "kill": {
        // Any worker that has started, paused ones included (a zombie that never wakes).
        const victim = rng.pick(fleet.alive().filter((w) => w.state !== "starting"));
        if (!victim) return;
        fleet.kill(victim);
        this.counters.killsSent++;
        return;
      }
      case "armedKill": {
        const victim = rng.pick(fleet.ready());
        const point = rng.pick(HOOK_POINTS);
        if (!victim || !point) return;
        fleet.send(victim, { type: "arm", point });
        this.counters.killsArmed++;
        return;
      }
      case "terminate":
        return this.#terminate(1 + rng.below(3));
      case "pause": {
        // A worker with runs in hand, so its clients time out, retry elsewhere and take over.
        const ready = fleet.ready();
        const victim = rng.pick(ready.filter((w) => w.calls.size > 0)) ?? rng.pick(ready);
        if (!victim || ready.length < 2) return;
        fleet.pause(victim, Math.round(this.#o.leaseMs * rng.between(1.5, 3)));
        this.counters.pauses++;
        return;
      }
      case "storm":
        this.#o.storm();
        this.counters.storms++;
        return;
    }
  }

  /** End 1-3 random worker connections in this database; the driver's own are never picked. */
  async #terminate(n: number): Promise<void> {
    const { rows } = await this.#o.pool.query<{ ended: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ended FROM (
         SELECT pid FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE $1
         ORDER BY random() LIMIT $2
       ) AS victims`,
      [`${WORKER_APP_PREFIX}%`, n],
    );
    this.counters.terminated += rows.filter((r) => r.ended).length;
  }

  async #restart(server: Restartable): Promise<void> {
    this.#o.log("chaos: restarting the PostgreSQL server");
    const started = Date.now();
    await server.restart();
    this.counters.restarts++;
    this.#o.log(`chaos: server back after ${Date.now() - started} ms`);
  }
}
