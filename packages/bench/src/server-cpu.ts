/**
 * The server's CPU time, to put beside the client's: on a 2-core machine
 * shared by client and server, ops/s at 16 clients is bounded by the CPU
 * both spend per operation, and the client's share alone does not say
 * which side a change relieves. The bench only runs against a server on
 * this machine (main.ts refuses any other), so the backends serving its
 * databases are processes here: their time on the CPU is the first field
 * of /proc/<pid>/schedstat, in nanoseconds. Shared server processes (WAL
 * writer, checkpointer) and other databases' backends are not counted.
 */
import { readFile } from "node:fs/promises";
import type pg from "pg";

/** Nanoseconds each backend of the bench's databases has run so far, by pid. */
export type ServerCpu = () => Promise<ReadonlyMap<number, number>>;

async function cpuNs(pid: number): Promise<number | undefined> {
  const text = await readFile(`/proc/${pid}/schedstat`, "utf8").catch(() => undefined);
  const ns = Number(text?.split(" ")[0]);
  return Number.isFinite(ns) ? ns : undefined;
}

/**
 * Server CPU between two samples, ms: a backend that connected in between
 * counts from 0 (all its time is in the window); one that exited in
 * between is lost, which only the pools' end or a dropped connection does.
 */
export function serverMsBetween(start: ReadonlyMap<number, number>, end: ReadonlyMap<number, number>): number {
  let ns = 0;
  for (const [pid, t] of end) ns += t - (start.get(pid) ?? 0);
  return ns / 1e6;
}

/**
 * A sampler for the backends connected to `databases`, or undefined where
 * /proc/<pid>/schedstat cannot be read (not Linux, or the server's
 * processes are hidden from this user).
 */
export async function serverCpu(admin: pg.Pool, databases: readonly string[]): Promise<ServerCpu | undefined> {
  const own = (await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
  if (own === undefined || (await cpuNs(own)) === undefined) return undefined;
  return async () => {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = ANY($1::text[])",
      [databases],
    );
    const out = new Map<number, number>();
    for (const { pid } of rows) {
      const ns = await cpuNs(pid);
      if (ns !== undefined) out.set(pid, ns);
    }
    return out;
  };
}
