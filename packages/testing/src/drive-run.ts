/**
 * Taking one run of `crashAtEveryBoundary` to its end: after a crash, the
 * duplicate that must be refused, the release and the retry; after a
 * suspension (children, a sleep, a wait), resuming what is due as
 * `idempo resume` does (the children, then the parent they wake), taking
 * over a child whose attempt crashed as a worker would, sending the
 * signals a wait needs, until the run has a final answer.
 */
import type { Engine, RunRecord, RunResult, Workflow } from "@idempo/core";
import { IdempotencyKeyInProgressError } from "@idempo/core";
import type { DueReport } from "@idempo/core/internal";
import { CrashSignal, resumeDue } from "@idempo/core/internal";

/** How one call ended: its result, or what it threw. */
export interface Settled {
  readonly value?: RunResult<unknown>;
  readonly error?: unknown;
}

/** `p`'s result or what it threw, never a rejection. */
export const settle = (p: Promise<RunResult<unknown>>): Promise<Settled> =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

/** An error as a problem sentence names it. */
export const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : `a thrown ${typeof error}: ${String(error)}`;

/** Rounds of resuming due runs one run may take (each takes at least one run a step on). */
const MAX_ROUNDS = 1_000;

/** One run to finish, and where its problems go. */
interface Drive {
  readonly engine: Engine;
  readonly workflow: Workflow<unknown, unknown>;
  readonly tenantId: string;
  readonly key: string;
  /** The boundary crashed at; `null` for the run without a crash. */
  readonly point: string | null;
  /** One more `runOnce` of the run's request. */
  readonly call: () => Promise<Settled>;
  /** Whether the crash of this run has fired. */
  readonly fired: () => boolean;
  /** The payload of the signal each wait gets, by name, or a function making it per run. */
  readonly signals: Readonly<Record<string, unknown>> | undefined;
  readonly problems: string[];
}

/**
 * From the first attempt's end to the run's final answer: the answer, or
 * the last error when the run cannot get one (its problem is pushed).
 */
export async function driveToEnd(d: Drive, first: Settled, crashedFirst: boolean): Promise<Settled> {
  const { engine, tenantId, key, problems } = d;
  const mine = (r: { tenantId: string; key: string }) => r.tenantId === tenantId && r.key === key;
  const signalled = new Set<string>();
  const othersFailed: string[] = [];
  let last = first;
  let crashed = crashedFirst;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (last.value && last.value.outcome !== "suspended") return last;
    if (last.error !== undefined && !crashed) {
      const who = d.point === null ? "the run without a crash" : "the retry after the crash";
      problems.push(`${who} failed: ${describe(last.error)}`);
      return last;
    }
    const record = await engine.inspect(tenantId, key);
    if (record?.status === "suspended") {
      const firedBefore = d.fired();
      const report = await wake(d, record, signalled, othersFailed);
      if (typeof report === "string") {
        problems.push(report);
        return last;
      }
      const failed = report.failed.find(mine);
      const others = report.failed.filter((f) => !mine(f) && !(f.error instanceof CrashSignal));
      othersFailed.push(...others.map((f) => `${f.key}: ${describe(f.error)}`));
      if (!firedBefore && d.fired()) {
        const crash = report.failed.find((f) => f.error instanceof CrashSignal);
        if (!crash) problems.push(`the crash at ${d.point} was swallowed: the resumed attempt ended without it`);
        else if (!mine(crash)) {
          // A child crashed: its lease ended at once, the next round takes it over as a worker would.
          const child = await engine.inspect(tenantId, crash.key);
          if (child?.status === "in_flight") await engine.release(tenantId, crash.key);
          continue;
        }
        crashed = true;
        last = { error: failed?.error ?? new CrashSignal(String(d.point)) };
        continue;
      }
      if (failed) {
        crashed = false;
        last = { error: failed.error };
      } else if (report.resumed.some((r) => mine(r) && r.outcome !== "suspended")) {
        // Completed: its stored response, as a client's retry gets it.
        crashed = false;
        last = await d.call();
      }
      continue;
    }
    if (record && record.status !== "in_flight" && record.status !== "completed") {
      problems.push(`the run is ${record.status}: ${record.parkedReason ?? "nothing takes it on"}`);
      return last;
    }
    if (record?.status === "in_flight" && crashed) {
      // The crashed attempt's lease is still valid: a duplicate must be refused, not run beside it.
      const dup = await d.call();
      if (!(dup.error instanceof IdempotencyKeyInProgressError)) {
        problems.push(
          `a duplicate while the crashed attempt held the lease was not refused with 409: it got ${
            dup.error === undefined ? `status ${dup.value?.status}` : describe(dup.error)
          }`,
        );
      }
      await engine.release(tenantId, key);
    }
    const firedBefore = d.fired();
    last = await d.call();
    crashed = !firedBefore && d.fired();
  }
  problems.push(`the run had no final answer after ${MAX_ROUNDS} rounds of resuming what was due`);
  return last;
}

/** Send the signal the run waits for (once), then resume every due run; a string when nothing can go on. */
async function wake(
  d: Drive,
  record: RunRecord,
  signalled: Set<string>,
  othersFailed: readonly string[],
): Promise<DueReport | string> {
  const waiting = record.waitingFor;
  if (waiting?.kind === "signal" && !signalled.has(waiting.name)) {
    if (!d.signals || !Object.hasOwn(d.signals, waiting.name)) {
      return `the run waits for signal '${waiting.name}': give its payload in the signals option`;
    }
    signalled.add(waiting.name);
    const given = d.signals[waiting.name];
    const payload = typeof given === "function" ? given({ key: d.key, point: d.point ?? "none" }) : given;
    try {
      await d.engine.signal(d.tenantId, d.key, waiting.name, payload);
    } catch (error) {
      return `signal '${waiting.name}' was refused: ${describe(error)}`;
    }
  }
  const report = await resumeDue(d.engine, { workflows: [d.workflow] });
  if (report.resumed.length + report.failed.length > 0) return report;
  // Nothing due: a child whose attempt crashed (its lease released) is taken over as a worker takes stale runs.
  const stale = await d.engine.resumeStale({ workflows: [d.workflow] });
  if (stale.resumed.length + stale.failed.length > 0) return stale;
  const parked = stale.parked.map((p) => `${p.key}: parked (${p.reason})`);
  return stuck(record, [...othersFailed, ...parked]);
}

/** Why a suspended run does not go on: nothing of it is due. */
function stuck(record: RunRecord, othersFailed: readonly string[]): string {
  const w = record.waitingFor;
  if (w?.kind === "sleep") {
    return (
      `the run sleeps in '${w.name}' until ${w.until?.toISOString() ?? "later"} and the helper does not move time: ` +
      "give the sleep a duration of 0 in this test"
    );
  }
  const base = `the run waits (${w ? `${w.kind} '${w.name}'` : "suspended"}) and nothing of it is due`;
  const children = (record.children ?? []).filter((c) => c.status !== "completed");
  const open = children.map((c) => `${c.item}[${c.index}] ${c.status}`).join(", ");
  const failed = othersFailed.length > 0 ? `; runs that failed meanwhile: ${othersFailed.join("; ")}` : "";
  return `${base}${open ? `: children not completed: ${open}` : ""}${failed}`;
}
