/**
 * Worker processes of a scenario: each started from one entry file (through
 * tsx, resolving @idempo/core to its source, in this package's directory)
 * with the same arguments, SIGKILLed and replaced by the driver, and asked
 * to stop cleanly at the end. The entry sends one IPC message once it runs
 * and exits on the message "stop".
 */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = fileURLToPath(new URL("../..", import.meta.url));

/** Resolves once the process has exited (at once when it already has). */
const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });

/** The worker processes of one scenario run. */
export class ProcessFleet {
  readonly #workers = new Set<ChildProcess>();
  /** The workers that said they run (a victim is chosen among these). */
  readonly #ready = new Set<ChildProcess>();
  /** Workers SIGKILLed so far. */
  kills = 0;

  /** `entry`: the worker's entry file (a path); `args`: its arguments, the same for every worker. */
  constructor(
    private readonly entry: string,
    private readonly args: readonly string[],
  ) {}

  /** Workers running now (started and not killed). */
  get running(): number {
    return this.#ready.size;
  }

  /** Start one more worker; resolves once it runs. */
  async start(): Promise<void> {
    const child = fork(this.entry, [...this.args], {
      cwd: PACKAGE_DIR,
      execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.#workers.add(child);
    child.once("exit", () => {
      this.#workers.delete(child);
      this.#ready.delete(child);
    });
    await new Promise<void>((resolve, reject) => {
      child.once("message", () => {
        this.#ready.add(child);
        resolve();
      });
      child.once("exit", (code, exitSignal) =>
        reject(new Error(`worker ${this.entry} exited (${code ?? exitSignal}) before it was ready`)),
      );
    });
  }

  /**
   * SIGKILL the worker `pick` chooses among the running ones, wait for it to
   * die, and start a fresh one; resolves once that one runs.
   */
  async killOne(pick: (count: number) => number): Promise<void> {
    const victim = [...this.#ready][pick(this.#ready.size)];
    if (!victim) return;
    victim.kill("SIGKILL");
    this.kills++;
    await exited(victim);
    await this.start();
  }

  /** SIGKILL every worker at once, and only once all are dead start as many fresh ones. */
  async killAll(): Promise<number> {
    const all = [...this.#workers];
    for (const w of all) w.kill("SIGKILL");
    await Promise.all(all.map(exited));
    this.kills += all.length;
    await Promise.all(all.map(() => this.start()));
    return all.length;
  }

  /** Ask every worker to stop cleanly; SIGKILL one that has not exited 30 s later. */
  async stop(): Promise<void> {
    await Promise.all(
      [...this.#workers].map(async (w) => {
        w.send("stop", () => undefined);
        const timer = setTimeout(() => w.kill("SIGKILL"), 30_000);
        await exited(w);
        clearTimeout(timer);
      }),
    );
  }
}
