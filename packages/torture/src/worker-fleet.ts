/**
 * The driver's side of the worker processes: spawn them (TypeScript through
 * tsx, resolving @idempo/core to its source), route their answers, SIGKILL
 * and SIGSTOP/SIGCONT them, and replace every worker that died.
 */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ClientOutcome, DriverMessage, WorkerConfig, WorkerMessage } from "./protocol.ts";

export interface FleetOptions {
  readonly size: number;
  readonly databaseUrl: string;
  readonly leaseMs: number;
  readonly relayLeaseMs: number;
  /** Relays and resumers LISTEN on a pool of their own (see `WorkerConfig.listen`). */
  readonly listen: boolean;
  readonly onResult: (callId: number, outcomes: readonly ClientOutcome[]) => void;
  readonly onFenced: (count: number) => void;
  /** A worker died; `calls` were outstanding on it. */
  readonly onExit: (worker: WorkerProcess, exitSignal: NodeJS.Signals | null, calls: readonly number[]) => void;
  /** A zombie round's messages: a worker froze itself, a successor waits, the zombie tried its write. */
  readonly onZombieEvent: (worker: WorkerProcess, message: ZombieEvent) => void;
}

export type ZombieEvent = Extract<WorkerMessage, { type: "frozen" | "held" | "zombie-tried" }>;

export interface WorkerProcess {
  /** Unique per process, also part of its connections' application_name. */
  readonly index: number;
  /** Its place in the fleet; odd slots run a background resumer. */
  readonly slot: number;
  readonly child: ChildProcess;
  state: "starting" | "ready" | "paused" | "dead";
  /** Calls sent to it and not answered yet. */
  readonly calls: Set<number>;
}

const WORKER_ENTRY = fileURLToPath(new URL("./worker-main.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

export class Fleet {
  readonly #options: FleetOptions;
  readonly #workers = new Set<WorkerProcess>();
  #nextIndex = 1;
  readonly #holds = new Map<string, Extract<DriverMessage, { type: "hold" }>>();
  #closing = false;

  constructor(options: FleetOptions) {
    this.#options = options;
  }

  /** Spawn the fleet and wait until every worker is connected. */
  async start(): Promise<void> {
    for (let slot = 1; slot <= this.#options.size; slot++) this.#spawn(slot);
    const deadline = Date.now() + 60_000;
    while (this.ready().length < this.#options.size) {
      if (Date.now() > deadline) throw new Error("workers did not start within 60 s");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Workers that take calls now (not starting, paused or dead). */
  ready(): WorkerProcess[] {
    return [...this.#workers].filter((w) => w.state === "ready");
  }

  /** Workers whose process is alive, paused or not. */
  alive(): WorkerProcess[] {
    return [...this.#workers].filter((w) => w.state !== "dead");
  }

  send(worker: WorkerProcess, message: DriverMessage): void {
    if (message.type === "run") worker.calls.add(message.callId);
    // A worker that died a moment ago: its exit handler reports the call as lost.
    worker.child.send(message, (error) => void error);
  }

  kill(worker: WorkerProcess): void {
    worker.child.kill("SIGKILL");
  }

  /** SIGSTOP now, SIGCONT after `ms`: the worker's leases run out while it sleeps, and it wakes as a zombie. */
  pause(worker: WorkerProcess, ms: number): void {
    if (worker.state !== "ready") return;
    worker.state = "paused";
    worker.child.kill("SIGSTOP");
    setTimeout(() => this.resume(worker), ms).unref();
  }

  /**
   * Send to every live worker (paused ones get it when they wake). Holds
   * stay in force until released: a worker started later gets them too.
   */
  broadcast(message: DriverMessage, except?: WorkerProcess): void {
    if (message.type === "hold") this.#holds.set(`${message.tenantId}\u0000${message.key}`, message);
    if (message.type === "release") this.#holds.delete(`${message.tenantId}\u0000${message.key}`);
    for (const w of this.alive()) if (w !== except) this.send(w, message);
  }

  resume(worker: WorkerProcess): void {
    if (worker.state !== "paused") return;
    worker.state = "ready";
    worker.child.kill("SIGCONT");
  }

  /** SIGKILL every worker and wait until all have exited; none is replaced. */
  async stopAll(): Promise<void> {
    this.#closing = true;
    const exits = this.alive().map((w) => new Promise<void>((resolve) => w.child.once("close", () => resolve())));
    for (const w of this.alive()) w.child.kill("SIGKILL");
    await Promise.all(exits);
  }

  #spawn(slot: number): void {
    const index = this.#nextIndex++;
    const config: WorkerConfig = {
      index,
      databaseUrl: this.#options.databaseUrl,
      leaseMs: this.#options.leaseMs,
      resumer: slot % 2 === 1,
      relayLeaseMs: this.#options.relayLeaseMs,
      listen: this.#options.listen,
    };
    const child = fork(WORKER_ENTRY, [JSON.stringify(config)], {
      cwd: PACKAGE_DIR,
      execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const worker: WorkerProcess = { index, slot, child, state: "starting", calls: new Set() };
    this.#workers.add(worker);
    child.on("message", (message: WorkerMessage) => {
      if (message.type === "ready") {
        for (const hold of this.#holds.values()) this.send(worker, hold);
        if (worker.state === "starting") worker.state = "ready";
      } else if (message.type === "result") {
        worker.calls.delete(message.callId);
        this.#options.onResult(message.callId, message.outcomes);
      } else if (message.type === "fenced") {
        this.#options.onFenced(message.count);
      } else {
        // It stops itself right after this message: no call may go to it until the driver wakes it.
        if (message.type === "frozen" && worker.state === "ready") worker.state = "paused";
        this.#options.onZombieEvent(worker, message);
      }
    });
    child.on("error", () => undefined);
    // "close", not "exit": by then every message the worker sent has been delivered.
    child.once("close", (_code, exitSignal) => {
      worker.state = "dead";
      this.#workers.delete(worker);
      const calls = [...worker.calls];
      worker.calls.clear();
      this.#options.onExit(worker, exitSignal, calls);
      if (!this.#closing) setTimeout(() => this.#closing || this.#spawn(slot), 100).unref();
    });
  }
}
