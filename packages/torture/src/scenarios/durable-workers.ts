/** The worker processes of the durable scenario: started from their own entry file, in this package's directory. */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const WORKER_ENTRY = fileURLToPath(new URL("../durable-worker-main.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("../..", import.meta.url));

/** A worker process delivering outbox messages to `receiver`; resolves `ready` once its worker and relay run. */
function spawnWorker(
  url: string,
  leaseMs: number,
  receiver: { readonly url: string; readonly secret: string },
): { child: ChildProcess; ready: Promise<void> } {
  const child = fork(WORKER_ENTRY, [url, String(leaseMs), receiver.url, receiver.secret], {
    cwd: PACKAGE_DIR,
    execArgv: ["--import", "tsx", "--conditions=@idempo/source"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code, exitSignal) =>
      reject(new Error(`durable worker exited (${code ?? exitSignal}) before it was ready`)),
    );
  });
  ready.catch(() => undefined);
  return { child, ready };
}

/** Resolves once the process has exited (at once when it already has). */
const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });

/** The worker processes of one durable run: started, killed and replaced by the driver, stopped at the end. */
export class DurableFleet {
  readonly #workers = new Set<ChildProcess>();
  /** Workers SIGKILLed so far. */
  kills = 0;

  constructor(
    private readonly url: string,
    private readonly leaseMs: number,
    private readonly receiver: { readonly url: string; readonly secret: string },
  ) {}

  /** Start one more worker; resolves once it runs. */
  async start(): Promise<void> {
    const w = spawnWorker(this.url, this.leaseMs, this.receiver);
    this.#workers.add(w.child);
    w.child.once("exit", () => this.#workers.delete(w.child));
    await w.ready;
  }

  /** SIGKILL the worker `pick` chooses among the live ones, wait for it to die, and start a fresh one. */
  async killOne(pick: (count: number) => number): Promise<void> {
    const victim = [...this.#workers][pick(this.#workers.size)];
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
