/**
 * What the fan-out test files share: a worker stopped with its test, a poll
 * bounded by work rather than time, and the rows of a parent and its
 * children read straight from `idempo.runs`, and the simplest child: one
 * that answers with the index it was given.
 */
import { sql } from "kysely";
import { expect, onTestFinished } from "vitest";
import { z } from "zod";
import type { Engine, Worker } from "../../src/index.ts";
import { createEngine, workflow } from "../../src/index.ts";
import { setFaultHook } from "../../src/internal.ts";
import type { TestDatabase, TestDb } from "./db.ts";

/** Two engines as two processes would have them: one on the file's pool, one on a pool of `max` of its own. */
export function twoProcesses(t: TestDatabase, max: number): [Engine, Engine] {
  return [createEngine({ db: t.db }), createEngine({ db: t.connect(max) })];
}

/** A worker without sweeps or schedules unless asked, stopped when the test ends. */
export function worker(
  engine: Engine,
  opts: Omit<Parameters<Engine["startWorker"]>[0], "sweep"> & { sweep?: boolean },
): Worker {
  const w = engine.startWorker({ sweep: false, schedules: false, intervalMs: 50, ...opts });
  onTestFinished(() => w.stop());
  return w;
}

/** Poll until `check` holds. The bound is generous: it catches a hang, it is no verdict on speed. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeout = 60_000): Promise<void> {
  await expect.poll(check, { timeout, interval: 25, message: what }).toBe(true);
}

/** Set the engine's fault hook for this test only. */
export function hooked(engine: Engine, hook: Parameters<typeof setFaultHook>[1]): void {
  setFaultHook(engine, hook);
  onTestFinished(() => setFaultHook(engine, undefined));
}

/** The run's status, or undefined when there is no row. */
export async function statusOf(db: TestDb, tenantId: string, key: string): Promise<string | undefined> {
  const { rows } = await sql<{ status: string }>`
    SELECT status FROM idempo.runs WHERE tenant_id = ${tenantId} AND key = ${key}`.execute(db);
  return rows[0]?.status;
}

/** How many child rows name `parent` as their parent. */
export async function childCount(db: TestDb, tenantId: string, parent: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs WHERE tenant_id = ${tenantId} AND parent_key = ${parent}`.execute(db);
  return rows[0]?.n ?? 0;
}

/** Children runnable (due or running) as docs/fan-out.md counts them: not completed and not queued. */
export async function runnableChildren(db: TestDb, tenantId: string, parent: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM idempo.runs
    WHERE tenant_id = ${tenantId} AND parent_key = ${parent} AND status <> 'completed'
      AND NOT (status = 'suspended' AND wait_kind IS NOT DISTINCT FROM 'queued')`.execute(db);
  return rows[0]?.n ?? 0;
}

/** The input of a child that is told its place in the map. */
export const indexedInput = z.object({ i: z.number().int() });

/** A child that answers 200 with the index it was given, through one step. */
export function echoChild(name: string) {
  return workflow(name)
    .input(indexedInput)
    .step("s", ({ input }) => ({ i: input.i }))
    .respond(({ state }) => ({ status: 200, body: state.i }));
}
