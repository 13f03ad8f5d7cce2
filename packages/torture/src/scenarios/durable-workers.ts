/** The worker processes of the durable scenario: started from their own entry file, in this package's directory. */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const WORKER_ENTRY = fileURLToPath(new URL("../durable-worker-main.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("../..", import.meta.url));

/** A worker process; resolves `ready` once its worker runs. */
export function spawnWorker(url: string, leaseMs: number): { child: ChildProcess; ready: Promise<void> } {
  const child = fork(WORKER_ENTRY, [url, String(leaseMs)], {
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
export const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
