/**
 * Fault-injection helpers over the internal hook: crash an attempt at a
 * named boundary, pause it there, release many callers at once, and wait on
 * the database clock instead of guessing sleeps.
 */
import { sql } from "kysely";
import type { Engine } from "../../src/index.ts";
import { CrashSignal, setFaultHook } from "../../src/internal.ts";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Every boundary of the SPEC checkout workflow, in the order a run passes them. */
export const CHECKOUT_POINTS = [
  "before:phase:create_order",
  "after:phase:create_order",
  "before:step:charge",
  "called:step:charge",
  "after:step:charge",
  "before:phase:record_charge",
  "after:phase:record_charge",
] as const;
export type CheckoutPoint = (typeof CHECKOUT_POINTS)[number];

export interface Crash {
  /** How often the crash fired. */
  readonly fired: number;
  /** Detach the hook. */
  clear(): void;
}

/**
 * Crash the first `times` attempts (attempt numbers 1..times) that reach `point`
 * on this engine; later attempts pass. Only runs of `key` are affected when given.
 */
export function crashAt(engine: Engine, point: string, opts: { times?: number; key?: string } = {}): Crash {
  const times = opts.times ?? 1;
  const crash = { fired: 0, clear: () => setFaultHook(engine, undefined) };
  setFaultHook(engine, (p, run) => {
    if (p !== point || (opts.key !== undefined && run.key !== opts.key)) return;
    if (crash.fired >= times) return;
    crash.fired++;
    throw new CrashSignal(p);
  });
  return crash;
}

export interface Pause {
  /** Resolves when the first attempt reaches the point. */
  readonly reached: Promise<void>;
  /** Let the paused attempt go on. */
  resume(): void;
  clear(): void;
}

/** Pause attempt `attempt` (Default: 1) of runs on this engine when it reaches `point`. */
export function pauseAt(engine: Engine, point: string, opts: { attempt?: number } = {}): Pause {
  const attempt = opts.attempt ?? 1;
  let reach!: () => void;
  let resume!: () => void;
  const reached = new Promise<void>((r) => {
    reach = r;
  });
  const gate = new Promise<void>((r) => {
    resume = r;
  });
  setFaultHook(engine, async (p, run) => {
    if (p !== point || run.attempt !== attempt) return;
    reach();
    await gate;
  });
  return { reached, resume, clear: () => setFaultHook(engine, undefined) };
}

/** A promise that opens once `n` parties wait on it: the start line of a race. */
export function barrier(n: number): { wait(): Promise<void> } {
  let arrived = 0;
  let open!: () => void;
  const gate = new Promise<void>((r) => {
    open = r;
  });
  return {
    wait() {
      arrived++;
      if (arrived >= n) open();
      return gate;
    },
  };
}

/** Settle every promise and sort the outcomes into values and errors. */
export async function settle<T>(promises: Promise<T>[]): Promise<{ values: T[]; errors: unknown[] }> {
  const results = await Promise.allSettled(promises);
  return {
    values: results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : [])),
    errors: results.flatMap((r) => (r.status === "rejected" ? [r.reason] : [])),
  };
}

/** Poll `fn` until it returns a non-undefined value or `timeoutMs` passes. */
export async function waitFor<T>(fn: () => Promise<T | undefined>, timeoutMs = 5_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`waitFor: condition not met within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/** Wait until the key's lease has run out by the database clock. */
export async function waitForLeaseExpiry(
  engine: Engine,
  tenantId: string,
  key: string,
  timeoutMs = 5_000,
): Promise<void> {
  await waitFor(async () => {
    const rec = await engine.inspect(tenantId, key);
    if (!rec) throw new Error(`no record for ${tenantId}/${key}`);
    return rec.leaseRemainingMs != null && rec.leaseRemainingMs <= 0 ? true : undefined;
  }, timeoutMs);
}

/**
 * Wait until the database clock has passed the lease the key holds right
 * now. When the run is still owned afterwards, only a renewal can have kept
 * it: a heartbeat test without a guess of how long a tick takes.
 */
export async function waitPastCurrentLease(
  // biome-ignore lint/suspicious/noExplicitAny: any Kysely instance of the test database
  db: import("kysely").Kysely<any>,
  tenantId: string,
  key: string,
  timeoutMs = 30_000,
): Promise<void> {
  const { rows } = await sql<{ until: string | null }>`
    SELECT locked_until::text AS until FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(db);
  const until = rows[0]?.until;
  if (!until) throw new Error(`no lease on ${tenantId}/${key}`);
  await waitFor(async () => {
    const now = await sql<{ past: boolean }>`SELECT clock_timestamp() > ${until}::timestamptz AS past`.execute(db);
    return now.rows[0]?.past ? true : undefined;
  }, timeoutMs);
}
