/**
 * The failover test bed, `scripts/failover/cluster.sh`, driven from a test:
 * two PostgreSQL nodes under Patroni (synchronous mode) behind HAProxy on
 * ports of their own. Every call runs the script and waits for it.
 */
import { execFile, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const SCRIPT = fileURLToPath(new URL("../../../../scripts/failover/cluster.sh", import.meta.url));

/** The script's exit code for "this machine cannot have the cluster" (no binaries, no way to install them). */
const UNAVAILABLE = 3;

/** What `up` found: the front's connection string, or why the cluster cannot be had here. */
export type ClusterUp = { readonly url: string } | { readonly unavailable: string };

function run(args: string[], timeoutMs: number) {
  const res = spawnSync("bash", [SCRIPT, ...args], { encoding: "utf8", timeout: timeoutMs });
  return { code: res.status, stdout: res.stdout.trim(), stderr: res.stderr.trim() };
}

function ok(args: string[], timeoutMs = 120_000): string {
  const res = run(args, timeoutMs);
  if (res.code !== 0) throw new Error(`cluster.sh ${args.join(" ")} exited ${res.code}:\n${res.stderr}`);
  return res.stdout;
}

/** Bring the cluster up (installing what is missing); exit 3 of the script is `unavailable`. */
export function clusterUp(): ClusterUp {
  const res = run(["up"], 600_000);
  if (res.code === UNAVAILABLE) return { unavailable: res.stderr };
  if (res.code !== 0) throw new Error(`cluster.sh up exited ${res.code}:\n${res.stderr}`);
  return { url: res.stdout.split("\n").pop() ?? "" };
}

/** Stop everything and remove the data; harmless when nothing runs. */
export function clusterDown(): void {
  ok(["down"]);
}

/** The leader's postmaster: its node's name and pid, to kill it from the test without blocking on a child process. */
export function primaryPostmaster(): { readonly node: string; readonly pid: number } {
  const [node = "", pid = ""] = ok(["primary-pid"]).split(" ");
  return { node, pid: Number(pid) };
}

/** The current leader's name, empty when there is none. */
export function leaderName(): string {
  return ok(["leader"]);
}

/** A node's own connection string (not through HAProxy). */
export function nodeUrl(name: string): string {
  return ok(["node-url", name]);
}

/** One line per node and the front, for a failure's log. */
export function clusterStatus(): string {
  const res = run(["status"], 30_000);
  return `${res.stdout}\n${res.stderr}`.trim();
}

const execFileP = promisify(execFile);

/** Run the script without blocking the event loop (the clients' timers keep running while it works). */
async function runAsync(args: string[], timeoutMs: number): Promise<string> {
  try {
    const { stdout } = await execFileP("bash", [SCRIPT, ...args], { encoding: "utf8", timeout: timeoutMs });
    return stdout.trim();
  } catch (error) {
    const e = error as { code?: unknown; stderr?: string };
    throw new Error(`cluster.sh ${args.join(" ")} exited ${String(e.code)}:\n${e.stderr ?? ""}`);
  }
}

/** What the torture's chaos does to the cluster. */
export interface ClusterControl {
  /** Wait until there is a leader, its synchronous standby, and the front routes to the leader only. */
  settle(): Promise<void>;
  /** SIGKILL the leader's postmaster; resolves with the node killed once the signal is sent. */
  killPrimary(): Promise<string>;
  /** A graceful switchover to the standby; resolves with the new leader once the front routes to it. */
  switchover(): Promise<string>;
  /** The current leader's own connection string for `database` (not through the front). */
  leaderUrl(database: string): Promise<string>;
}

/** The test bed of `scripts/failover/cluster.sh`, as the chaos drives it. */
export const testBed: ClusterControl = {
  settle: async () => {
    await runAsync(["settle"], 120_000);
  },
  killPrimary: async () => {
    const [node = "", pid = ""] = (await runAsync(["primary-pid"], 30_000)).split(" ");
    process.kill(Number(pid), "SIGKILL");
    return node;
  },
  switchover: () => runAsync(["switchover"], 120_000),
  leaderUrl: async (database) => {
    const leader = await runAsync(["leader"], 30_000);
    if (leader === "") throw new Error("the cluster has no leader");
    const url = new URL(await runAsync(["node-url", leader], 30_000));
    url.pathname = `/${database}`;
    return url.toString();
  },
};
